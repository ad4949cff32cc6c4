"""The link transport under the deployment's TLS (causal_client/tls.py, services/certs.py): what
works, and each way a connection must fail at connect, with its own type and message, while the
server goes on serving others. Real sockets on loopback, certificates made per test session."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import ssl
from pathlib import Path

import pytest

from causal_client import tls
from services import certs
from services.runtime import event_loop_factory
from services.transport.client import open_link
from services.transport.errors import LinkClosed, LinkError
from services.transport.probe import health
from services.transport.server import LinkServer
from tests.test_transport import echo_server, free_port

NODES = ("ireland", "frankfurt")


def deployment(directory: Path, **validity) -> Path:
    """A TLS directory with a CA, the two nodes and a client (``validity``: of the leaves)."""
    identities = [certs.Identity(n, certs.LOOPBACK) for n in NODES] + [
        certs.Identity("client", certs.LOOPBACK)
    ]
    authority = certs.Authority.make("test")
    directory.mkdir(parents=True)
    authority.save(directory)
    for identity in identities:
        certs.write_identity(directory, authority, identity, **validity)
    return directory


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.UTC)
    made = {
        "good": deployment(root / "good"),
        "other": deployment(root / "other"),  # another CA, same names
        "expired": root / "expired",
        "future": root / "future",
        "mixed": root / "mixed",  # trusts the deployment's CA, presents a certificate of another
    }
    # The same CA as "good", its leaves out of date: copies of the CA files, leaves issued again.
    for name, start, days in (
        ("expired", now - datetime.timedelta(days=30), 1),
        ("future", now + datetime.timedelta(days=2), 30),
    ):
        folder = made[name]
        folder.mkdir()
        for ca_file in (tls.CA_FILE, certs.CA_KEY_FILE):
            (folder / ca_file).write_bytes((made["good"] / ca_file).read_bytes())
        authority = certs.Authority.load(folder)
        for identity in (*NODES, "client"):
            certs.write_identity(
                folder, authority, certs.Identity(identity, certs.LOOPBACK), not_before=start, days=days
            )
    made["mixed"].mkdir()
    (made["mixed"] / tls.CA_FILE).write_bytes((made["good"] / tls.CA_FILE).read_bytes())
    for suffix in (".pem", ".key"):
        (made["mixed"] / f"client{suffix}").write_bytes((made["other"] / f"client{suffix}").read_bytes())
    return made


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    """Runs a test's coroutine on asyncio's loop and on uvloop's (the services' links run there)."""
    factory = event_loop_factory() if request.param == "uvloop" else None

    def on_loop(coroutine):
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(asyncio.wait_for(coroutine, 20))

    return on_loop


def as_identity(monkeypatch, directory: Path | None, identity: str = "client") -> None:
    if directory is None:
        monkeypatch.delenv(tls.TLS_DIR_ENV, raising=False)
    else:
        monkeypatch.setenv(tls.TLS_DIR_ENV, str(directory))
    monkeypatch.setenv(tls.IDENTITY_ENV, identity)


async def tls_server(monkeypatch, directory: Path, port: int, identity: str = "ireland") -> LinkServer:
    as_identity(monkeypatch, directory, identity)
    return await echo_server(port)


async def roundtrip(
    endpoint: str, server_name: str | None = "ireland", timeout_s: float = 3.0
) -> list[bytes]:
    connection, answer = await open_link(endpoint, "echo", b"x", timeout_s=timeout_s, server_name=server_name)
    assert answer == b"hello x"
    connection.send_many([b"tweet text"])
    got = await connection.receive()
    connection.end()
    return got


def test_a_link_runs_over_tls_both_ways_verified_and_the_health_probe_too(monkeypatch, dirs, run):
    async def go():
        port = free_port()
        server = await tls_server(monkeypatch, dirs["good"], port)
        as_identity(monkeypatch, dirs["good"])
        try:
            assert await roundtrip(f"127.0.0.1:{port}") == [b"tweet text"]
            assert await asyncio.to_thread(health, f"127.0.0.1:{port}")
            connection, _ = await open_link(f"127.0.0.1:{port}", "echo", b"x", server_name="ireland")
            assert isinstance(connection.transport.get_extra_info("ssl_object"), ssl.SSLObject)
            connection.end()
        finally:
            await server.stop()

    run(go())


def expect_refusal(run, monkeypatch, dirs, server_dir: str, client_dir: str | None, kind: type[Exception],
                   server_name: str | None = "ireland", timeout_s: float = 3.0) -> str:  # fmt: skip
    """Connects a client of ``client_dir`` to a server of ``server_dir``: it must fail with
    ``kind``; then a good client still gets through. Returns the error's message."""

    async def go() -> str:
        port = free_port()
        server = (
            await tls_server(monkeypatch, dirs[server_dir], port)
            if server_dir
            else await plain(monkeypatch, port)
        )
        try:
            as_identity(monkeypatch, dirs[client_dir] if client_dir else None)
            with pytest.raises(kind) as caught:
                await roundtrip(f"127.0.0.1:{port}", server_name, timeout_s)
            if server_dir == "good":  # the client was at fault: the server serves others on
                as_identity(monkeypatch, dirs["good"])
                assert await roundtrip(f"127.0.0.1:{port}") == [b"tweet text"]
            return str(caught.value)
        finally:
            await server.stop()

    return run(go())


async def plain(monkeypatch, port: int) -> LinkServer:
    as_identity(monkeypatch, None)
    return await echo_server(port)


def test_a_server_of_another_ca_is_refused_by_the_client(monkeypatch, dirs, run):
    message = expect_refusal(run, monkeypatch, dirs, "other", "good", tls.UnknownAuthority)
    assert "ireland" in message


def test_a_client_of_another_ca_is_refused_by_the_server_which_logs_why(monkeypatch, dirs, caplog, run):
    with caplog.at_level(logging.WARNING, logger="link"):
        message = expect_refusal(run, monkeypatch, dirs, "good", "mixed", tls.CertificateRefused)
    assert "does not accept our certificate" in message
    assert any(
        "TLS handshake failed" in r.getMessage() and "UnknownAuthority" in r.getMessage()
        for r in caplog.records
    )


def test_an_expired_server_certificate_is_refused(monkeypatch, dirs, run):
    assert "expired" in expect_refusal(run, monkeypatch, dirs, "expired", "good", tls.CertificateExpired)


def test_an_expired_client_certificate_is_refused_and_the_server_logs_it(monkeypatch, dirs, caplog, run):
    with caplog.at_level(logging.WARNING, logger="link"):
        message = expect_refusal(run, monkeypatch, dirs, "good", "expired", tls.CertificateExpired)
    assert "our certificate" in message
    assert any("CertificateExpired" in r.getMessage() for r in caplog.records)


def test_a_certificate_not_yet_valid_is_refused(monkeypatch, dirs, run):
    assert "not yet valid" in expect_refusal(
        run, monkeypatch, dirs, "future", "good", tls.CertificateNotYetValid
    )


def test_a_server_with_another_name_is_refused(monkeypatch, dirs, run):
    """ireland's certificate is valid, but the client meant frankfurt (a wrong address, a relay
    that leads elsewhere)."""
    message = expect_refusal(
        run, monkeypatch, dirs, "good", "good", tls.WrongServerName, server_name="frankfurt"
    )
    assert "frankfurt" in message


def test_a_plaintext_client_at_a_tls_port_is_told_so(monkeypatch, dirs, run):
    message = expect_refusal(run, monkeypatch, dirs, "good", None, tls.PlaintextPeer, timeout_s=1.0)
    assert tls.TLS_DIR_ENV in message


def test_a_plaintext_stranger_at_a_tls_port_is_logged_and_gets_nothing(monkeypatch, dirs, caplog, run):
    """Something that speaks first in plaintext (an HTTP client, Redis's PING) gets no byte of
    the link back, and the server says what came."""

    async def go():
        port = free_port()
        server = await tls_server(monkeypatch, dirs["good"], port)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(1024), 3)
            assert b"SATURN" not in answer and b"HTTP" not in answer
            writer.close()
            await asyncio.sleep(0.1)
        finally:
            await server.stop()

    with caplog.at_level(logging.WARNING, logger="link"):
        run(go())
    assert any("PlaintextPeer" in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]


def test_a_tls_client_at_a_plaintext_port_is_told_so(monkeypatch, dirs, run):
    expect_refusal(run, monkeypatch, dirs, "", "good", tls.PlaintextPeer)


def test_a_client_without_a_certificate_is_refused_and_nothing_reaches_a_service(monkeypatch, dirs, run):
    """A TLS client that verifies the server but has no certificate of its own: the server
    ends the connection before the link's handshake, so no service ever sees it."""

    async def go():
        port = free_port()
        got: list[bytes] = []

        async def collect(connection, hello: bytes) -> None:
            got.append(hello)
            connection.accept(b"")
            await connection.wait_closed()

        as_identity(monkeypatch, dirs["good"], "ireland")
        server = await echo_server(port, collect=collect)
        try:
            context = ssl.create_default_context(cafile=str(dirs["good"] / tls.CA_FILE))
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname="ireland"
            )
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                await asyncio.wait_for(reader.readexactly(64), 3)
            writer.close()
            assert got == []
        finally:
            await server.stop()

    run(go())


def test_a_link_error_or_tls_error_is_a_connection_error_the_links_retry():
    """The outgoing links retry on ConnectionError (a certificate may be fixed or rotated)."""
    assert issubclass(tls.TlsError, ConnectionError) and issubclass(LinkError, ConnectionError)
    assert issubclass(LinkClosed, ConnectionError)


def test_a_tls_port_answers_the_probe_and_a_plaintext_one_does_not(monkeypatch, dirs, run):
    async def go():
        tls_port, plain_port = free_port(), free_port()
        server = await tls_server(monkeypatch, dirs["good"], tls_port)
        other = await plain(monkeypatch, plain_port)
        try:
            assert await asyncio.to_thread(tls.speaks_tls, "127.0.0.1", tls_port)
            assert not await asyncio.to_thread(tls.speaks_tls, "127.0.0.1", plain_port)
            with socket.socket() as closed:
                closed.bind(("127.0.0.1", 0))
                assert not await asyncio.to_thread(tls.speaks_tls, "127.0.0.1", closed.getsockname()[1])
        finally:
            await server.stop()
            await other.stop()

    run(go())
