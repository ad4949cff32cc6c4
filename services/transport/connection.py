"""One link connection, either end: an ``asyncio.Protocol`` that does the handshake, cuts the byte
stream into frames and hands a service's messages over in bulk.

Why a ``Protocol`` and not streams or gRPC: a message costs one ``data_received`` call and a
slice; everything that arrived in one read is handed to the consumer at one wake-up
(``receive`` returns all of it), and a send is one ``transport.write``. The transport
micro-benchmark (``python -m loadtest bench transport``) measures the difference.

A connection carries one service's conversation, as a gRPC stream did: the client opens it with
the service's name and hello, the server accepts (with the service's answer) or refuses; then
both ends send messages until one ends it. Bad bytes (a header of an unknown kind, a body over
the limit, a frame out of place) end that connection with a logged reason; they never reach a
service and never stop the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import cast

from services.transport import handshake
from services.transport.errors import LinkClosed, LinkRefused, NotALinkPeer
from services.transport.frames import MAX_BODY, FrameDecoder, FrameError, Kind, frame, frames, open_frame

log = logging.getLogger("link")

HANDSHAKE_TIMEOUT_S = 10.0  # a server drops a connection that has not proved itself by then
INBOX_PAUSE_BYTES = 16 << 20  # a consumer this far behind stops the socket being read
MESSAGE = Kind.MESSAGE
OnOpen = Callable[["Connection", str, bytes], None]


class Connection(asyncio.Protocol):
    """One end of a link connection (``server``: the accepting end). Build it through
    ``LinkServer`` or ``open_link``, not directly."""

    def __init__(self, key: bytes, server: bool, on_open: OnOpen | None = None, max_body: int = MAX_BODY):
        self.key = key
        self.server = server
        self.on_open = on_open
        self.decoder = FrameDecoder(max_body)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self._raw = b""  # handshake bytes gathered so far
        self._nonce = b""
        self._handshaken = False
        self._opened = False  # OPEN taken (server) or answered (client)
        self._inbox: list[bytes] = []
        self._inbox_bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._writable = asyncio.Event()
        self._writable.set()
        loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[str] = loop.create_future()  # the reason it ended
        self.answer: asyncio.Future[bytes] = loop.create_future()  # client: ACCEPT's body
        self._handshake_timer: asyncio.TimerHandle | None = None
        self.service = ""  # what the client opened
        self._hello = b""  # client: the service's hello, sent once the server greeted
        self._outbox: list[bytes] = []  # frames sent while corked, written as one
        self._corked = 0
        self._ended = False  # the transport is closing or closed: nothing more is written
        self._on_messages: Callable[[list[bytes]], None] | None = None

    @property
    def greeted(self) -> bool:
        """Whether the other end has said anything yet (a server that refuses a client's
        certificate ends the connection after the TLS handshake without a word)."""
        return self._handshaken or bool(self._raw)

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream protocol's transport has asyncio.Transport's methods (uvloop's is not of its class).
        self.transport = stream = cast("asyncio.Transport", transport)
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self.server:
            greeting, self._nonce = handshake.greeting()
            stream.write(greeting)
            loop = asyncio.get_running_loop()
            self._handshake_timer = loop.call_later(HANDSHAKE_TIMEOUT_S, self._handshake_late)

    def data_received(self, data: bytes) -> None:
        if not self._handshaken:
            data = self._handshake(data)
            if not data:
                return
        try:
            received = self.decoder.feed(data)
        except FrameError as exc:
            self.abort(f"bad frame from {self.peer}: {exc}")
            return
        inbox = self._inbox
        for kind, body in received:
            if kind == MESSAGE and self._opened:
                inbox.append(body)
                self._inbox_bytes += len(body)
                continue
            if self._on_messages is not None and inbox:
                self._deliver(self._on_messages)  # what came before a control frame (an END) goes first
                inbox = self._inbox
            if not self._frame(kind, body):
                return
        if not inbox:
            return
        if self._on_messages is not None:
            self._deliver(self._on_messages)
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._inbox_bytes > INBOX_PAUSE_BYTES and not self._paused_reading:
            self._paused_reading = True
            assert self.transport is not None  # data comes only once the connection is made
            self.transport.pause_reading()

    def _deliver(self, on_messages: Callable[[list[bytes]], None]) -> None:
        """Callback mode: the messages gathered go to the consumer, ``on_messages``."""
        messages, self._inbox, self._inbox_bytes = self._inbox, [], 0
        try:
            on_messages(messages)
        except Exception as exc:  # a consumer's bug ends this connection, not the process
            log.exception("link %s (%s): its consumer failed", self.peer, self.service)
            self.end(f"internal error: {type(exc).__name__}")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        reason = f"the connection broke ({exc})" if exc else "the other end closed the connection"
        self._finish(reason)
        self._ended = True
        self._writable.set()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # -- handshake and control frames -------------------------------------------------------------
    def _handshake(self, data: bytes) -> bytes:
        """Gathers the handshake; returns what came after it (frames), b"" until it is done."""
        self._raw += data
        need = handshake.ANSWER_BYTES if self.server else handshake.GREETING_BYTES
        if len(self._raw) < need:
            if self._raw[: len(handshake.MAGIC)] != handshake.MAGIC[: len(self._raw)]:
                self._not_a_peer(self._raw)  # wrong from its first bytes: no need to wait
            return b""
        head, rest = self._raw[:need], self._raw[need:]
        self._raw = b""
        if head[: len(handshake.MAGIC)] != handshake.MAGIC:
            self._not_a_peer(head)
            return b""
        if self.server:
            why = handshake.check_answer(self.key, self._nonce, head)
            if why is not None:
                log.warning("link from %s refused: %s", self.peer, why)
                self._refuse_and_close(why)
                return b""
            if self._handshake_timer is not None:
                self._handshake_timer.cancel()
        else:
            transport = self.transport
            assert transport is not None  # the handshake comes only once the connection is made
            try:
                transport.write(handshake.answer(self.key, head))
            except NotALinkPeer as exc:
                self._fail(exc)
                return b""
            transport.write(open_frame(self.service, self._hello))
        self._handshaken = True
        return rest

    def _not_a_peer(self, first: bytes) -> None:
        if self.server:
            why = f"not a link client{handshake.guess_peer(first)}"
            log.warning("link from %s refused: %s", self.peer, why)
            self._close_transport(why)
        else:
            self._fail(NotALinkPeer(handshake.not_a_greeting(first)))

    def _handshake_late(self) -> None:
        log.warning("link from %s dropped: no handshake within %.0f s", self.peer, HANDSHAKE_TIMEOUT_S)
        self._close_transport("no handshake in time")

    def _frame(self, kind: int, body: bytes) -> bool:
        """A frame other than a message of an open connection; False once the connection ends."""
        if kind == Kind.END:
            reason = body.decode("utf-8", "replace")
            self._close_transport(reason or "the other end is done")
            return False
        if self.server and kind == Kind.OPEN and not self._opened:
            service, sep, hello = body.partition(b"\0")
            if not sep:
                self.abort(f"a malformed open from {self.peer}")
                return False
            self._opened = True
            self.service = service.decode("utf-8", "replace")
            assert self.on_open is not None
            self.on_open(self, self.service, hello)
            return not self._ended
        if not self.server and kind in (Kind.ACCEPT, Kind.REFUSE) and not self._opened:
            self._opened = True
            if kind == Kind.ACCEPT:
                if not self.answer.done():
                    self.answer.set_result(body)
                return True
            self._fail(LinkRefused(body.decode("utf-8", "replace")))
            return False
        self.abort(f"a frame of kind {kind} out of place from {self.peer}")
        return False

    # -- for services --------------------------------------------------------------------------------
    def accept(self, body: bytes = b"") -> None:
        """Server: takes the client's hello; messages may flow both ways."""
        self._write(frame(Kind.ACCEPT, body))

    def refuse(self, reason: str) -> None:
        """Server: turns the client's hello down; the client's ``open_link`` raises LinkRefused."""
        log.info("link from %s (%s) refused: %s", self.peer, self.service, reason)
        self._refuse_and_close(reason)

    def send(self, body: bytes) -> None:
        """One message, written at once (unless ``corked``); raises LinkClosed once the
        connection has ended."""
        self._write(frame(Kind.MESSAGE, body))

    def send_many(self, bodies: list[bytes]) -> None:
        """Several messages at once."""
        if bodies:
            self._write(frames(Kind.MESSAGE, bodies))

    @contextlib.contextmanager
    def corked(self) -> Iterator[None]:
        """Messages sent inside leave in one write at its end (one system call for a burst)."""
        self._corked += 1
        try:
            yield
        finally:
            self._corked -= 1
            if not self._corked:
                self._flush()

    def deliver_to(self, on_messages: Callable[[list[bytes]], None]) -> None:
        """Hands every batch of messages, as it is read, to ``on_messages`` (synchronously, in
        the read's callback: no wake-up of a task) instead of keeping them for ``receive``. For
        consumers that only hand messages on (a serializer, a proxy's label queue); an exception
        it raises ends the connection, logged."""
        self._on_messages = on_messages
        if self._inbox:
            self._deliver(on_messages)

    async def drain(self) -> None:
        """Waits while the socket's outgoing buffer is full (the other end reads slowly)."""
        await self._writable.wait()
        if self.closed.done():
            raise LinkClosed(self.closed.result())

    async def receive(self) -> list[bytes]:
        """Every message that has arrived (at least one), waiting for one if none has; raises
        LinkClosed once the connection has ended and every message before that was taken."""
        while not self._inbox:
            if self.closed.done():
                raise LinkClosed(self.closed.result())
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.take()

    def take(self) -> list[bytes]:
        """Every message that has arrived, perhaps none (does not wait)."""
        taken, self._inbox, self._inbox_bytes = self._inbox, [], 0
        if self._paused_reading and not self._ended and self.transport is not None:
            self._paused_reading = False
            self.transport.resume_reading()
        return taken

    def end(self, reason: str = "") -> None:
        """Ends the connection, telling the other end why (empty: done); what was sent before
        still goes first."""
        if not self._ended and self.transport is not None:
            self._flush()
            self.transport.write(frame(Kind.END, reason.encode()))
        self._close_transport(reason or "ended here")

    def abort(self, reason: str) -> None:
        """Ends the connection because of bad input from the other end, logged."""
        log.warning("link %s (%s) closed: %s", self.peer, self.service or "handshake", reason)
        self.end(reason)

    async def wait_closed(self) -> str:
        """Waits until the connection has ended; why it did. (Cancelling the wait leaves the
        connection as it is.)"""
        return await asyncio.shield(self.closed)

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    # -- internals ----------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self._ended:
            raise LinkClosed(self.closed.result() if self.closed.done() else "the link is closing")
        if self._corked:
            self._outbox.append(data)
        else:
            transport = self.transport
            assert transport is not None  # a link is written once it is open: the connection is made
            transport.write(data)

    def _flush(self) -> None:
        if self._outbox and not self._ended:
            assert self.transport is not None  # a link is written once it is open
            self.transport.write(b"".join(self._outbox))
        self._outbox.clear()

    def _refuse_and_close(self, reason: str) -> None:
        if not self._ended and self.transport is not None:
            self.transport.write(frame(Kind.REFUSE, reason.encode()))
        self._close_transport(reason)

    def _close_transport(self, reason: str) -> None:
        self._finish(reason)
        self._ended = True
        if self.transport is not None:
            self.transport.close()  # what was written still goes (asyncio flushes, then closes)

    def _fail(self, exc: Exception) -> None:
        """Client: the connection could not be opened."""
        if not self.answer.done():
            self.answer.set_exception(exc)
        self._close_transport(str(exc))

    def _finish(self, reason: str) -> None:
        if not self.closed.done():
            self.closed.set_result(reason)
        if not self.server and not self.answer.done():
            self.answer.set_exception(LinkClosed(reason))
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
