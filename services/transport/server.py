"""A process's link server: one port, one handshake, and the services the process runs on it
(tree links, bulk transfer, a serializer replica group's log, health)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

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
    the handshake below runs inside it; a failed TLS handshake ends that connection only, and is
    logged with its cause."""

    def __init__(self, name: str, host: str, port: int):
        auth.require_for(host, f"{name}'s link server on port {port}")
        self.name = name
        self.host, self.port = host, port
        self.key = link_key(auth.secret())
        files = tls.from_env()
        self.tls = None if files is None else tls.server_context(files, on_failure=self._handshake_failed)
        self.handlers: dict[str, Handler] = {}
        self.health = Health()
        self.tasks: set[asyncio.Task] = set()
        self.server: asyncio.Server | None = None

    def add(self, service: str, handler: Handler) -> None:
        self.handlers[service] = handler

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        handshake_s = HANDSHAKE_TIMEOUT_S if self.tls else None
        try:
            self.server = await loop.create_server(
                self._connection, self.host, self.port, reuse_address=True, ssl=self.tls,
                ssl_handshake_timeout=handshake_s,
            )  # fmt: skip
        except OSError as exc:
            raise OSError(f"{self.name}: cannot listen on {self.host}:{self.port}: {exc}") from exc
        self.health.set("", True)

    def _connection(self) -> Connection:
        return Connection(self.key, server=True, on_open=self._opened)

    def _handshake_failed(self, failure: tls.TlsError) -> None:
        log.warning("%s: a link's TLS handshake failed: %s", self.name, failure)

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
