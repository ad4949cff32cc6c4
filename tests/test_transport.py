"""The link transport (services/transport): handshake and credentials, framing, bad input, the
wrong kind of port at either end, health. Real sockets on loopback, one event loop, no process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

import pytest

from causal_client.errors import SECRET_ENV
from services.auth import CredentialsRequired
from services.transport.client import open_link
from services.transport.errors import LinkClosed, LinkRefused, LinkUnavailable, NotALinkPeer
from services.transport.frames import HEADER, MAX_BODY, FrameDecoder, FrameError, Kind, frame
from services.transport.handshake import ANSWER_BYTES, GREETING_BYTES, answer, link_key
from services.transport.probe import health
from services.transport.server import LinkServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def echo_server(port: int, **services) -> LinkServer:
    """A server whose "echo" service sends every message back (callback mode) and whose
    "collect" service keeps what it gets (task mode, ``receive``)."""
    server = LinkServer("test", "127.0.0.1", port)

    async def echo(connection, hello: bytes) -> None:
        connection.accept(b"hello " + hello)
        connection.deliver_to(lambda messages: connection.send_many(messages))
        await connection.wait_closed()

    server.add("echo", echo)
    for name, handler in services.items():
        server.add(name, handler)
    await server.start()
    return server


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 20))


# -- frames ---------------------------------------------------------------------------------------
def test_frames_arrive_whole_whatever_pieces_the_bytes_come_in():
    stream = b"".join(frame(Kind.MESSAGE, bytes([i]) * i) for i in range(50))
    for piece in (1, 3, 7, 64, len(stream)):
        decoder, got = FrameDecoder(), []
        for start in range(0, len(stream), piece):
            got += decoder.feed(stream[start : start + piece])
        assert got == [(Kind.MESSAGE, bytes([i]) * i) for i in range(50)], piece
        assert decoder.pending == 0


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (HEADER.pack(3, 99) + b"abc", "unknown kind 99"),
        (HEADER.pack(MAX_BODY + 1, Kind.MESSAGE), "over the limit"),
    ],
)
def test_a_bad_header_is_refused_before_its_body_is_buffered(raw, why):
    with pytest.raises(FrameError, match=why):
        FrameDecoder().feed(raw)


# -- conversations ----------------------------------------------------------------------------------
def test_messages_flow_both_ways_in_order():
    async def scenario():
        port = free_port()
        server = await echo_server(port)
        connection, answer_body = await open_link(f"127.0.0.1:{port}", "echo", b"there")
        assert answer_body == b"hello there"
        sent = [str(i).encode() * (i % 7) for i in range(2000)]
        with connection.corked():
            for body in sent[:1000]:
                connection.send(body)
        connection.send_many(sent[1000:])
        got: list[bytes] = []
        while len(got) < len(sent):
            got += await connection.receive()
        assert got == sent
        connection.end()
        await server.stop()

    run(scenario())


def test_a_task_reads_what_came_before_the_end_then_learns_why():
    async def scenario():
        port = free_port()
        collected: asyncio.Future[tuple[list[bytes], str]] = asyncio.get_running_loop().create_future()

        async def collect(connection, hello: bytes) -> None:
            connection.accept()
            got: list[bytes] = []
            try:
                while True:
                    got += await connection.receive()
            except LinkClosed as exc:
                collected.set_result((got, exc.reason))

        server = await echo_server(port, collect=collect)
        connection, _ = await open_link(f"127.0.0.1:{port}", "collect")
        connection.send_many([b"a", b"b", b"c"])
        connection.end("done here")
        got, reason = await collected
        assert got == [b"a", b"b", b"c"] and reason == "done here"
        await server.stop()

    run(scenario())


def test_a_refused_hello_says_why():
    async def scenario():
        port = free_port()

        async def picky(connection, hello: bytes) -> None:
            connection.refuse(f"{hello.decode()} is not a neighbour")

        server = await echo_server(port, picky=picky)
        with pytest.raises(LinkRefused, match="mallory is not a neighbour"):
            await open_link(f"127.0.0.1:{port}", "picky", b"mallory")
        with pytest.raises(LinkRefused, match=r"runs no 'tree' here \(it runs: echo, health, picky\)"):
            await open_link(f"127.0.0.1:{port}", "tree")
        await server.stop()

    run(scenario())


def test_a_failing_service_ends_its_connection_not_the_server(caplog):
    async def scenario():
        port = free_port()

        async def broken(connection, hello: bytes) -> None:
            connection.accept()
            await connection.receive()
            raise RuntimeError("a bug")

        server = await echo_server(port, broken=broken)
        connection, _ = await open_link(f"127.0.0.1:{port}", "broken")
        connection.send(b"x")
        reason = await connection.wait_closed()
        assert "internal error: RuntimeError" in reason
        still, _ = await open_link(f"127.0.0.1:{port}", "echo")  # the server serves on
        still.send(b"y")
        assert await still.receive() == [b"y"]
        await server.stop()

    with caplog.at_level(logging.ERROR):
        run(scenario())
    assert "a bug" in caplog.text


# -- credentials ----------------------------------------------------------------------------------
def test_a_client_without_the_secret_is_refused_before_anything_is_read(monkeypatch, caplog):
    async def scenario():
        port = free_port()
        monkeypatch.setenv(SECRET_ENV, "right")
        server = await echo_server(port)
        monkeypatch.setenv(SECRET_ENV, "wrong")
        with pytest.raises(LinkRefused, match="wrong credentials"):
            await open_link(f"127.0.0.1:{port}", "echo")
        monkeypatch.delenv(SECRET_ENV)
        with pytest.raises(LinkRefused, match="wrong credentials"):
            await open_link(f"127.0.0.1:{port}", "echo")
        monkeypatch.setenv(SECRET_ENV, "right")
        connection, _ = await open_link(f"127.0.0.1:{port}", "echo")
        connection.send(b"in")
        assert await connection.receive() == [b"in"]
        await server.stop()

    with caplog.at_level(logging.WARNING):
        run(scenario())
    assert "missing or wrong credentials" in caplog.text


def test_a_proof_is_good_for_one_connection_only():
    """A recorded answer replayed on a new connection (a new nonce) is refused."""

    async def scenario():
        port = free_port()
        server = await echo_server(port)
        key = link_key(None)
        first_reader, first_writer = await asyncio.open_connection("127.0.0.1", port)
        recorded = answer(key, await first_reader.readexactly(GREETING_BYTES))
        first_writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readexactly(GREETING_BYTES)
        writer.write(recorded + frame(Kind.OPEN, b"echo\0"))
        rest = await reader.read()
        assert HEADER.unpack_from(rest)[1] == Kind.REFUSE and b"wrong credentials" in rest
        writer.close()
        await server.stop()

    run(scenario())


def test_listening_beyond_loopback_needs_the_secret(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    with pytest.raises(CredentialsRequired, match="link server"):
        LinkServer("test", "0.0.0.0", free_port())


# -- the wrong kind of port ---------------------------------------------------------------------
@contextlib.asynccontextmanager
async def raw_server(first_bytes: bytes):
    """A TCP server that sends ``first_bytes`` on connect (b"": nothing) and reads forever."""

    async def handle(reader, writer):
        if first_bytes:
            writer.write(first_bytes)
        with contextlib.suppress(ConnectionError):
            await reader.read()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()


@pytest.mark.parametrize(
    ("first", "hint"),
    [
        (b"\x00\x00\x12\x04\x00\x00\x00\x00\x00", "HTTP/2: a gRPC port"),
        (b"-NOAUTH Authentication required.\r\n", "RESP: a Redis port"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "HTTP/1: a web or metrics port"),
    ],
)
def test_a_client_dialling_another_kind_of_port_says_so(first, hint):
    async def scenario():
        async with raw_server(first) as endpoint:
            with pytest.raises(NotALinkPeer, match=hint):
                await open_link(endpoint, "tree")

    run(scenario())


def test_a_port_that_says_nothing_is_named_as_probably_not_a_link_port():
    async def scenario():
        async with raw_server(b"") as endpoint:
            with pytest.raises(NotALinkPeer, match="is it a link port"):
                await open_link(endpoint, "tree", timeout_s=0.3)

    run(scenario())


def test_nothing_listening_is_unavailable():
    with pytest.raises(LinkUnavailable):
        run(open_link(f"127.0.0.1:{free_port()}", "tree", timeout_s=1))


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0" * 40, "HTTP/2"),
        (b"*1\r\n$4\r\nPING\r\n" + b"\0" * 40, "RESP"),
    ],
)
def test_a_link_port_names_the_other_kind_of_client_that_dialled_it(sent, logged, caplog):
    async def scenario():
        port = free_port()
        server = await echo_server(port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readexactly(GREETING_BYTES)
        writer.write(sent)
        assert await reader.read() == b""  # closed, nothing said to a stranger
        writer.close()
        await server.stop()

    with caplog.at_level(logging.WARNING):
        run(scenario())
    assert f"not a link client (it speaks {logged}" in caplog.text


# -- bad frames from a peer that did prove the secret ----------------------------------------------
@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (HEADER.pack(MAX_BODY + 1, Kind.MESSAGE), "over the limit"),
        (HEADER.pack(1, 77) + b"x", "unknown kind 77"),
        (frame(Kind.ACCEPT, b"?"), "out of place"),
    ],
)
def test_a_bad_frame_closes_that_connection_with_a_logged_reason(bad, why, caplog):
    async def scenario():
        port = free_port()
        server = await echo_server(port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        greeting = await reader.readexactly(GREETING_BYTES)
        proof = answer(link_key(None), greeting)
        assert len(proof) == ANSWER_BYTES
        writer.write(proof + frame(Kind.OPEN, b"echo\0") + frame(Kind.MESSAGE, b"fine") + bad)
        rest = await reader.read()  # the connection ends, saying why
        kind, body = FrameDecoder().feed(rest)[-1]
        assert kind == Kind.END and why in body.decode()
        writer.close()
        other, _ = await open_link(f"127.0.0.1:{port}", "echo")  # the server still serves
        other.send(b"ok")
        assert await other.receive() == [b"ok"]
        await server.stop()

    with caplog.at_level(logging.WARNING):
        run(scenario())
    assert why in caplog.text


# -- health -----------------------------------------------------------------------------------------
def test_health_is_asked_on_the_link_port_itself():
    async def scenario():
        port = free_port()
        server = await echo_server(port)
        endpoint = f"127.0.0.1:{port}"
        ask = asyncio.get_running_loop().run_in_executor
        assert await ask(None, health, endpoint)  # the process: serving once started
        assert not await ask(None, health, endpoint, "proxy")  # not set: not serving
        server.health.set("proxy", True)
        assert await ask(None, health, endpoint, "proxy")
        await server.stop()
        assert not await ask(None, health, endpoint)

    run(scenario())


def test_health_of_a_port_of_another_kind_is_false():
    async def scenario():
        async with raw_server(b"-ERR\r\n") as endpoint:
            assert not await asyncio.get_running_loop().run_in_executor(None, health, endpoint)

    run(scenario())
