"""What crosses the wire, read off it. Every node of a three-region deployment is reached at
127.0.0.2 and listens on 127.0.0.1; a relay in the test sits between on every port and keeps
every byte, both ways. During a checked run, client calls, a migration, and a Chirp sign-up and
post, it must find no tweet text, password, session cookie, written value or label on any
connection under TLS, and every connection must open with a TLS handshake; the same run without
TLS finds each of them (so the test can fail)."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from helpers.deadlines import scaled, wait_for
from helpers.http_browser import Browser
from helpers.topologies import load_topology

from causal_client import CausalClient, tls
from loadtest.check.run import CheckSettings, passed, run_check
from services import certs
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster

REACHED_AT, LISTENING_AT = "127.0.0.2", "127.0.0.1"
TLS_RECORD = (0x16, 0x03)  # a TLS handshake record, any version


class Recorder:
    """A TCP relay on every port given: REACHED_AT:port → LISTENING_AT:port, keeping both
    directions of every connection, and each connection's first bytes from the client."""

    def __init__(self, ports: dict[int, str]):
        self.ports = ports  # port → its owner
        self.bytes: dict[int, bytearray] = defaultdict(bytearray)
        self.openings: list[tuple[str, bytes]] = []  # (owner, the client's first bytes)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Recorder:
        self.thread.start()
        assert self.ready.wait(scaled(10)), "the recording relay did not start"
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(scaled(5))

    def seen(self) -> bytes:
        return b"".join(bytes(b) for b in self.bytes.values())

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        for port in self.ports:
            self.loop.run_until_complete(asyncio.start_server(self._relay(port), REACHED_AT, port))
        self.ready.set()
        self.loop.run_forever()

    def _relay(self, port: int):
        async def serve(client_reader, client_writer) -> None:
            try:
                server_reader, server_writer = await asyncio.open_connection(LISTENING_AT, port)
            except OSError:
                client_writer.close()
                return
            first = bytearray()

            async def pipe(reader, writer, from_client: bool) -> None:
                try:
                    while chunk := await reader.read(65536):
                        self.bytes[port] += chunk
                        if from_client and len(first) < 2:
                            first.extend(chunk[: 2 - len(first)])
                            if len(first) == 2:
                                self.openings.append((self.ports[port], bytes(first)))
                        writer.write(chunk)
                        await writer.drain()
                except (ConnectionError, OSError):
                    pass
                finally:
                    writer.close()

            await asyncio.gather(
                pipe(client_reader, server_writer, True), pipe(server_reader, client_writer, False)
            )

        return serve


def play(cluster: Cluster, tmp_path: Path) -> dict[str, bytes]:
    """Everything a deployment carries: a checked run, client calls and a migration, a Chirp
    sign-up and post read in another region. Returns the secrets it sent, by kind."""
    topology = cluster.topology
    data = run_check(
        CheckSettings(topology=Path("-"), protocol=topology.protocol, running=cluster.run_dir, duration=4,
                      sessions=3, strong_sessions=1, out=tmp_path / "check"),
        lambda line: None,
    )  # fmt: skip
    assert passed(data), data
    value = f"value-{secrets.token_hex(6)}"
    with CausalClient.connect(topology.client_address("virginia")) as client:
        alice = client.session("virginia")
        alice.write("all", f"wire:{value}", {"v": value})
        label_ts = str(alice.label.ts)
        alice.read("all", f"wire:{value}")  # the label travels with this call
        alice.migrate("frankfurt")
        alice.read("all", f"wire:{value}")
    browser = Browser(topology)
    name, password, tweet = (
        f"w{secrets.token_hex(4)}",
        f"pw-{secrets.token_hex(6)}",
        f"tweet-{secrets.token_hex(6)}",
    )
    assert browser.sign_up("virginia", name, password).status == 302
    browser.tweet("virginia", tweet)
    wait_for(lambda: tweet in browser.get("ireland", f"/u/{name}/").text, 15, "the tweet at ireland", 0.2)
    session = browser.cookie("session_virginia")
    assert session
    secure = {c.name: c.secure for c in browser.jar}
    assert secure["session_virginia"] == topology.tls and secure["csrftoken_virginia"] == topology.tls, secure
    hsts = browser.get("virginia", "/").headers.get("strict-transport-security")
    assert (hsts is not None) == topology.tls, hsts
    return {"tweet text": tweet.encode(), "password": password.encode(), "session cookie": session.encode(),
            "written value": value.encode(), "label": label_ts.encode()}  # fmt: skip


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_nothing_readable_crosses_the_wire_under_tls(tls, tmp_path, monkeypatch):
    topology = load_topology(
        "demo-3region.toml", protocol="saturn", host=REACHED_AT, bind=LISTENING_AT, tls=tls
    )
    ports = {port: owner for owner, _, port in topology.all_addresses()}
    recorder = Recorder(ports).start()
    monkeypatch.setattr(Cluster, "_check_ports_free", lambda self: None)  # the relay holds them
    try:
        with Cluster(topology, tmp_path / "run", web=True) as cluster:
            sent = play(cluster, tmp_path)
    finally:
        recorder.stop()
    carried = {ports[p] for p, b in recorder.bytes.items() if b}
    kinds = {owner.rpartition(".")[2].rstrip("0123456789") for owner in carried}
    assert {"frontend", "bulk", "metrics", "web", "broker", "redis", "serializer s-eu"} <= kinds, carried
    assert len(recorder.openings) >= len(ports), "fewer connections than ports: the relay saw too little"
    wire = recorder.seen()
    found = {kind: secret in wire for kind, secret in sent.items()}
    if tls:
        assert not any(found.values()), f"readable on the wire under TLS: {found}"
        plain = [(owner, first) for owner, first in recorder.openings if tuple(first) != TLS_RECORD]
        assert not plain, f"connections that did not open with a TLS handshake: {plain[:10]}"
    else:
        assert all(found.values()), f"the plaintext run should show every secret: {found}"


def test_a_redis_server_without_tls_is_told_apart(tmp_path):
    """The launcher refuses tls = true on a redis-server built without TLS (the wheel's may be)."""
    from services.launcher.redis_binary import find_redis_server, supports_tls

    assert supports_tls(find_redis_server())  # the one setup installs (Debian's) has it
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'Bad directive or wrong number of arguments'\nexit 1\n")
    fake.chmod(0o755)
    assert not supports_tls(str(fake))


def test_a_client_is_told_why_a_tls_store_will_not_have_it(launch, tmp_path, monkeypatch):
    """CausalClient.connect against a deployment under TLS: without certificates, with another
    CA's, with a certificate of another CA it presents; each fails at connect with its own type,
    and nothing is written; with the deployment's own it works."""
    cluster = launch("two-region.toml", protocol="saturn", tls=True)
    address = cluster.topology.client_address("a")
    good = Path(os.environ[tls.TLS_DIR_ENV])
    other = tmp_path / "other"
    certs.ensure(other, "other", [certs.Identity("client", certs.LOOPBACK)])
    mixed = tmp_path / "mixed"  # trusts the deployment's CA, presents a client certificate of another
    mixed.mkdir()
    (mixed / tls.CA_FILE).write_bytes((good / tls.CA_FILE).read_bytes())
    for name in ("client.pem", "client.key"):
        (mixed / name).write_bytes((other / name).read_bytes())
    cases = [(None, tls.PlaintextPeer, tls.TLS_DIR_ENV), (other, tls.UnknownAuthority, "not of our CA"),
             (mixed, tls.UnknownAuthority, "does not know the CA of our certificate")]  # fmt: skip
    with monkeypatch.context() as env:  # undone here, before the cluster's own restore at its stop
        for directory, kind, words in cases:
            if directory is None:
                env.delenv(tls.TLS_DIR_ENV)
            else:
                env.setenv(tls.TLS_DIR_ENV, str(directory))
            with pytest.raises(kind, match=re.escape(words)):
                CausalClient.connect(address)
    with CausalClient.connect(address) as client:
        assert not client.session("a").read("all", "never-written").cells
