"""The services' hot calls to their stores (gear calls, stream reads) on hiredis directly.

Why: redis-py's asyncio client spends about 94 µs of CPU per call here, most of it in Python
around the socket (streams, retries, response callbacks); a connection that is an
``asyncio.Protocol`` packing with ``hiredis.pack_command`` and parsing with ``hiredis.Reader``
spends 29 (the same MGET of 40 arguments, one at a time, uvloop). Every remote update, label read
and payload read is such a call, in every region. redis-py keeps everything else (the library's
installation, trims, cursors, tree records): calls made once a second or once a run.

A client holds one shared connection on which calls are pipelined (their replies come back in
order), and a small pool of connections for blocking reads (``XREAD BLOCK``), which hold theirs
until they return. Errors are redis-py's own types (``ResponseError``, ``ConnectionError``,
``TimeoutError``, ``AuthenticationError``), so callers handle both clients alike. A call that
times out closes its connection: the server is stuck, or its reply would come to nobody.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any, cast
from urllib.parse import unquote, urlparse

import hiredis
from redis._parsers.base import BaseParser  # redis-py's own mapping of error replies to its types
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as StoreConnectionError
from redis.exceptions import TimeoutError as StoreTimeoutError

from causal_client import tls

CONNECT_TIMEOUT_S = 5.0
IDLE_BLOCKING_KEPT = 4  # connections kept for blocking reads once they are done


class StoreUnreachable(StoreConnectionError):
    """No connection could be made: nothing was sent (a call may be made elsewhere)."""


class _ErrorReply(Exception):
    """An error reply as hiredis hands it over, before it becomes redis-py's type for it."""


class _Connection(asyncio.Protocol):
    """One connection: calls go out in order, replies resolve their futures in the same order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=_ErrorReply)
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol's transport has asyncio.Transport's methods (uvloop's is not of its class).
        self.transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError as exc:
                self.fail(StoreConnectionError(f"the store sent bytes that are not RESP: {exc}"))
                return
            if reply is False:
                return
            future = self.pending.popleft()
            if future.done():
                continue  # its caller gave up (cancelled)
            if isinstance(reply, _ErrorReply):  # "ERR x" is ResponseError("x"), "LOADING" a busy store...
                future.set_exception(BaseParser.parse_error(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        why = exc or "end of stream"
        self._fail_pending(StoreConnectionError(f"the store closed the connection ({why})"))

    def send(self, args: tuple) -> asyncio.Future[Any]:
        if self.closed or self.transport is None:
            raise StoreConnectionError("the connection to the store is closed")
        future = asyncio.get_running_loop().create_future()
        self.pending.append(future)
        self.transport.write(hiredis.pack_command(args))
        return future

    def fail(self, exc: Exception) -> None:
        """Closes the connection, failing every call still waiting on it with ``exc``."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        self._fail_pending(exc)

    def _fail_pending(self, exc: Exception) -> None:
        while self.pending:
            future = self.pending.popleft()
            if not future.done():
                future.set_exception(exc)


class LeanRedis:
    """A store at ``url`` (``redis://[user]:[password]@host:port/db``), for calls on the hot path."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        parsed = urlparse(url)
        # rediss://: under the deployment's TLS (the store verified as the host named here)
        self.tls = tls.process_context(server=False) if parsed.scheme == "rediss" else None
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 6379
        self.username = unquote(parsed.username) if parsed.username else None
        self.password = unquote(parsed.password) if parsed.password else None
        self.db = int(parsed.path.lstrip("/") or 0)
        self.timeout_s = timeout_s
        self._shared: _Connection | None = None
        self._connecting = asyncio.Lock()
        self._idle: list[_Connection] = []  # for blocking reads

    async def execute(self, *args: Any) -> Any:
        """One call on the shared connection (pipelined with the others in flight)."""
        connection = self._shared
        if connection is None or connection.closed:
            connection = await self._shared_connection()
        return await self._wait(connection, connection.send(args), self.timeout_s)

    async def execute_all(self, *commands: tuple) -> list[Any]:
        """Several calls sent together on the shared connection (one round trip, not one each):
        every reply in order, an error reply as its exception (each call is made whatever the
        earlier ones answered). A lost connection or a timeout raises."""
        connection = self._shared
        if connection is None or connection.closed:
            connection = await self._shared_connection()
        futures = [connection.send(command) for command in commands]
        try:
            await self._wait(connection, asyncio.gather(*futures, return_exceptions=True), self.timeout_s)
        finally:
            for future in futures:  # (retrieved: none is left unread)
                if future.done() and not future.cancelled():
                    future.exception()
        replies = [f.exception() or f.result() for f in futures]
        lost = next((r for r in replies if isinstance(r, StoreConnectionError | StoreTimeoutError)), None)
        if lost is not None:
            raise lost
        return replies

    async def execute_blocking(self, *args: Any, block_s: float) -> Any:
        """A call that blocks at the server up to ``block_s`` (an ``XREAD BLOCK``): on a connection
        of its own, given back to the pool once the reply came."""
        connection = self._idle.pop() if self._idle else await self._connect()
        try:
            reply = await self._wait(connection, connection.send(args), block_s + self.timeout_s)
        except BaseException:
            connection.fail(StoreConnectionError("a blocking call was abandoned"))  # its reply may still come
            raise
        if not connection.closed and len(self._idle) < IDLE_BLOCKING_KEPT:
            self._idle.append(connection)
        else:
            connection.fail(StoreConnectionError("not kept"))
        return reply

    async def close(self) -> None:
        for connection in [self._shared, *self._idle]:
            if connection is not None:
                connection.fail(StoreConnectionError("the client is closed"))
        self._shared, self._idle = None, []

    async def _shared_connection(self) -> _Connection:
        async with self._connecting:
            if self._shared is None or self._shared.closed:
                self._shared = await self._connect()
            return self._shared

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):  # not wait_for: see services/bulk/tail.py
                _, connection = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls else None,
                )
        except ssl.SSLError as exc:  # the cause named (tls.explain), as a store this side cannot reach
            raise StoreUnreachable(str(tls.explain(exc, f"the store at {self.host}:{self.port}"))) from None
        except (OSError, TimeoutError) as exc:
            raise StoreUnreachable(f"cannot reach the store at {self.host}:{self.port}: {exc}") from None
        try:
            if self.password is not None:
                who = (self.username,) if self.username else ()
                await self._wait(connection, connection.send(("AUTH", *who, self.password)), self.timeout_s)
            if self.db:
                await self._wait(connection, connection.send(("SELECT", self.db)), self.timeout_s)
        except (ResponseError, AuthenticationError) as exc:
            connection.fail(StoreConnectionError("authentication failed"))
            raise AuthenticationError(str(exc)) from None
        return connection

    @staticmethod
    async def _wait(connection: _Connection, future: asyncio.Future[Any], timeout_s: float) -> Any:
        timer = asyncio.get_running_loop().call_later(timeout_s, _time_out, connection, timeout_s)
        try:
            return await future
        finally:
            timer.cancel()


def _time_out(connection: _Connection, timeout_s: float) -> None:
    connection.fail(StoreTimeoutError(f"the store did not answer in {timeout_s:.0f} s"))
