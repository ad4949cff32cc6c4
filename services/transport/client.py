"""Opening a link connection: ``open_link(endpoint, service, hello)``."""

from __future__ import annotations

import asyncio

from services import auth
from services.transport import handshake
from services.transport.connection import Connection
from services.transport.errors import LinkClosed, LinkRefused, LinkUnavailable, NotALinkPeer

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
        async with asyncio.timeout(timeout_s):  # not wait_for: see services/bulk/tail.py
            _, connection = await loop.create_connection(make, host, port)
    except (OSError, TimeoutError) as exc:
        raise LinkUnavailable(f"{endpoint}: {exc or 'no connection in time'}") from None
    try:
        async with asyncio.timeout(timeout_s):
            return connection, await asyncio.shield(connection.answer)
    except TimeoutError:
        connection.end("no answer in time")
        why = f"{endpoint} sent no link greeting within {timeout_s:.0f} s: is it a link port?"
        raise NotALinkPeer(why) from None
    except LinkClosed as exc:
        raise LinkUnavailable(f"{endpoint}: {exc.reason}") from None
    except (LinkRefused, NotALinkPeer) as exc:
        raise type(exc)(f"{endpoint}: {exc}") from None
