"""Opening a link connection: ``open_link(endpoint, service, hello)``, and a blocking health
probe for the launcher and containers."""

from __future__ import annotations

import asyncio
import socket

from services import auth
from services.transport import handshake
from services.transport.connection import Connection
from services.transport.errors import LinkClosed, LinkRefused, LinkUnavailable, NotALinkPeer
from services.transport.frames import FrameDecoder, Kind, open_frame
from services.transport.server import HEALTH, SERVING

CONNECT_TIMEOUT_S = 5.0


def split(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


async def open_link(
    endpoint: str, service: str, hello: bytes = b"", timeout_s: float = CONNECT_TIMEOUT_S
) -> tuple[Connection, bytes]:
    """Connects, proves the deployment's secret, opens ``service`` with ``hello``; returns the
    connection and the server's answer. Raises LinkUnavailable (nothing answered in time),
    NotALinkPeer (a port of another kind), LinkRefused (the server said no, and why)."""
    loop = asyncio.get_running_loop()
    key = handshake.link_key(auth.secret())
    host, port = split(endpoint)

    def make() -> Connection:
        connection = Connection(key, server=False)
        connection.service, connection._hello = service, hello
        return connection

    try:
        _, connection = await asyncio.wait_for(loop.create_connection(make, host, port), timeout_s)
    except (OSError, TimeoutError) as exc:
        raise LinkUnavailable(f"{endpoint}: {exc or 'no connection in time'}") from None
    try:
        return connection, await asyncio.wait_for(asyncio.shield(connection.answer), timeout_s)
    except TimeoutError:
        connection.end("no answer in time")
        why = f"{endpoint} sent no link greeting within {timeout_s:.0f} s: is it a link port?"
        raise NotALinkPeer(why) from None
    except LinkClosed as exc:
        raise LinkUnavailable(f"{endpoint}: {exc.reason}") from None
    except (LinkRefused, NotALinkPeer) as exc:
        raise type(exc)(f"{endpoint}: {exc}") from None


def health(endpoint: str, service: str = "", timeout_s: float = 0.5) -> bool:
    """Blocking: whether the link server at ``endpoint`` reports ``service`` SERVING (for health
    checks, which run outside any event loop). Any failure is "not healthy"."""
    try:
        with socket.create_connection(split(endpoint), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            received = b""
            while len(received) < handshake.GREETING_BYTES:
                chunk = sock.recv(handshake.GREETING_BYTES - len(received))
                if not chunk:
                    return False
                received += chunk
            key = handshake.link_key(auth.secret())
            sock.sendall(handshake.answer(key, received) + open_frame(HEALTH, service.encode()))
            decoder = FrameDecoder(max_body=1024)
            while chunk := sock.recv(1024):
                for kind, body in decoder.feed(chunk):
                    return kind == Kind.ACCEPT and body == SERVING
    except (OSError, ValueError):
        return False
    return False
