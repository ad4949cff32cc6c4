"""A process's link server: one port, one handshake, and the services the process runs on it
(tree links, bulk transfer, a serializer replica group's log, health)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import cast

from causal_client import tls
from services import auth
from services.transport.connection import HANDSHAKE_TIMEOUT_S, Connection
from services.transport.errors import LinkClosed
from services.transport.handshake import link_key
from services.transport.probe import HEALTH, NOT_SERVING, SERVING

log = logging.getLogger("link")

#: A service's handler: takes the connection and the client's hello, accepts or refuses it, and
#: serves it until done (the server ends the connection when the handler returns).
Handler = Callable[[Connection, bytes], Awaitable[None]]


class Health:
    """What the process reports as healthy, by name ("" is the process itself, SERVING once the
    server started), as gRPC's health service does."""

    def __init__(self) -> None:
        self.serving: dict[str, bool] = {}

    def set(self, service: str, serving: bool) -> None:
        self.serving[service] = serving

    def status(self, service: str) -> bytes:
        return SERVING if self.serving.get(service, False) else NOT_SERVING


class LinkServer:
    """Listens on ``host:port`` (refusing to go beyond loopback without the deployment's secret)
    and runs each accepted connection's service in a task of its own. With the deployment's TLS
    (``causal_client/tls.py``) a connection is TLS first, the client's certificate required, and
    the handshake below runs inside it; a failed TLS handshake ends that connection only."""

    def __init__(self, name: str, host: str, port: int):
        auth.require_for(host, f"{name}'s link server on port {port}")
        self.name = name
        self.host, self.port = host, port
        self.key = link_key(auth.secret())
        self.tls = tls.process_context(server=True)
        self.handlers: dict[str, Handler] = {}
        self.health = Health()
        self.tasks: set[asyncio.Task] = set()
        self.server: asyncio.Server | None = None

    def add(self, service: str, handler: Handler) -> None:
        self.handlers[service] = handler

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        factory: Callable[[], asyncio.Protocol] = self._connection if self.tls is None else self._tls_first
        try:
            self.server = await loop.create_server(factory, self.host, self.port, reuse_address=True)
        except OSError as exc:
            raise OSError(f"{self.name}: cannot listen on {self.host}:{self.port}: {exc}") from exc
        self.health.set("", True)

    def _connection(self) -> Connection:
        return Connection(self.key, server=True, on_open=self._opened)

    def _tls_first(self) -> asyncio.Protocol:
        return _TlsHandshake(self)

    async def _secure(self, transport: asyncio.Transport) -> None:
        """TLS over an accepted connection, then the link's own handshake inside it. Done here
        rather than by ``create_server(ssl=...)``, which drops a failed handshake without a word:
        this way the server logs why (a certificate of another CA, expired, a plaintext client)."""
        peer = transport.get_extra_info("peername")
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        connection = self._connection()
        assert self.tls is not None
        try:
            secured = await asyncio.get_running_loop().start_tls(
                transport, connection, self.tls, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S
            )
        except (OSError, TimeoutError, asyncio.CancelledError) as exc:
            transport.abort()
            if not isinstance(exc, asyncio.CancelledError):
                log.warning(
                    "%s: link from %s refused: %s", self.name, where, tls.explain(exc, f"a client at {where}")
                )
            return
        if secured is None:  # the client left during the handshake
            return
        connection.connection_made(secured)

    async def stop(self, grace_s: float = 1.0) -> None:
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=grace_s)

    def _opened(self, connection: Connection, service: str, hello: bytes) -> None:
        if service == HEALTH:
            connection.accept(self.health.status(hello.decode("utf-8", "replace")))
            connection.end()
            return
        handler = self.handlers.get(service)
        if handler is None:
            offered = ", ".join(sorted([*self.handlers, HEALTH]))
            connection.refuse(f"{self.name} runs no {service!r} here (it runs: {offered})")
            return
        task = asyncio.get_running_loop().create_task(self._serve(handler, connection, hello))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _serve(self, handler: Handler, connection: Connection, hello: bytes) -> None:
        try:
            await handler(connection, hello)
        except LinkClosed:
            pass
        except asyncio.CancelledError:
            connection.end("the server stops")
            raise
        except Exception as exc:  # a service's bug ends its connection, never the process
            log.exception("%s: %s from %s failed", self.name, connection.service, connection.peer)
            connection.end(f"internal error: {type(exc).__name__}")
            return
        with contextlib.suppress(LinkClosed):
            connection.end()


class _TlsHandshake(asyncio.Protocol):
    """An accepted connection before its TLS handshake: holds its bytes back (reading paused)
    until ``start_tls`` takes the transport over."""

    def __init__(self, server: LinkServer) -> None:
        self.server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        stream = cast("asyncio.Transport", transport)
        stream.pause_reading()
        task = asyncio.get_running_loop().create_task(self.server._secure(stream))
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    def data_received(self, data: bytes) -> None:  # never: reading is paused until start_tls
        raise AssertionError("bytes before the TLS handshake")
