"""Opening a link connection: ``open_link(endpoint, service, hello)``."""

from __future__ import annotations

import asyncio
import ssl

from causal_client import tls
from services import auth
from services.transport import handshake
from services.transport.connection import Connection
from services.transport.errors import LinkClosed, LinkRefused, LinkUnavailable, NotALinkPeer

CONNECT_TIMEOUT_S = 5.0


def split(endpoint: str) -> tuple[str, int]:
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


async def open_link(
    endpoint: str,
    service: str,
    hello: bytes = b"",
    timeout_s: float = CONNECT_TIMEOUT_S,
    server_name: str | None = None,
) -> tuple[Connection, bytes]:
    """Connects, proves the deployment's secret, opens ``service`` with ``hello``; returns the
    connection and the server's answer. Raises LinkUnavailable (nothing answered in time),
    NotALinkPeer (a port of another kind), LinkRefused (the server said no, and why), and under
    the deployment's TLS a ``tls.TlsError`` that names what failed. ``server_name``: the node the
    server's certificate must be for (the endpoint may be a relay's address); else its host."""
    loop = asyncio.get_running_loop()
    key = handshake.link_key(auth.secret())
    host, port = split(endpoint)
    context = tls.process_context(server=False)
    name = None if context is None else server_name or host

    def make() -> Connection:
        connection = Connection(key, server=False)
        connection.service, connection._hello = service, hello
        return connection

    try:
        async with asyncio.timeout(timeout_s):  # not wait_for: see services/bulk/tail.py
            _, connection = await loop.create_connection(make, host, port, ssl=context, server_hostname=name)
    except (ssl.SSLError, ConnectionResetError) as exc:
        if context is None:
            raise LinkUnavailable(f"{endpoint}: {exc}") from None
        raise tls.explain(exc, f"{server_name or host} at {endpoint}") from None
    except (OSError, TimeoutError) as exc:
        if context is not None and isinstance(exc, TimeoutError):
            why = f"{endpoint} did not finish a TLS handshake in {timeout_s:g} s: not a TLS port?"
            raise tls.PlaintextPeer(why) from None
        raise LinkUnavailable(f"{endpoint}: {exc or 'no connection in time'}") from None
    try:
        async with asyncio.timeout(timeout_s):
            return connection, await asyncio.shield(connection.answer)
    except TimeoutError:
        connection.end("no answer in time")
        if context is None and await asyncio.to_thread(tls.speaks_tls, host, port):
            why = f"{endpoint} is a TLS port, and this process runs without TLS (${tls.TLS_DIR_ENV} unset)"
            raise tls.PlaintextPeer(why) from None
        why = f"{endpoint} sent no link greeting within {timeout_s:.0f} s: is it a link port?"
        raise NotALinkPeer(why) from None
    except LinkClosed as exc:
        if context is not None and not connection.greeted:  # closed right after the handshake
            where = f"{server_name or host} at {endpoint}"
            raise (
                tls.explain(exc, where) if "ALERT" in exc.reason.upper() else tls.refused_by_peer(where)
            ) from None
        raise LinkUnavailable(f"{endpoint}: {exc.reason}") from None
    except (LinkRefused, NotALinkPeer) as exc:
        raise type(exc)(f"{endpoint}: {exc}") from None
