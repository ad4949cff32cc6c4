"""Messages held for their link's emulated latency (``causal_client.wan.DelayLine``), then written
to a link connection: every message that is due at one moment in one write.

Driven by the event loop's timers, not by a task per link: a message that is due costs one
timer callback (or, on a link without latency, one ``call_soon`` per turn of the loop however
many messages were put in it), never the wake-up of a task through an event. A link without
latency, jitter or injected faults (a real deployment's) skips the delay line: a list and that
one callback. What is put while no connection is attached waits, in order, for the next one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from services.transport.connection import Connection
from services.wan import DelayLine, Link

T = TypeVar("T")
#: How items that are due together become message bodies (one each, or merged into one).
Encode = Callable[[list[T]], list[bytes]]
MIN_REARM_S = 0.0005  # a timer that fired early (the loop's clock is coarser) re-arms at least this late


class DelayedWrites(Generic[T]):
    def __init__(self, link: Link, encode: Encode[T]) -> None:
        self.line: DelayLine[T] = DelayLine(link)
        self.instant = link.is_instant
        self.pending: list[T] = []  # an instant link's items (its line stays empty)
        self.encode = encode
        self.connection: Connection | None = None
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._timer_due = 0.0

    def __len__(self) -> int:
        return len(self.line) + len(self.pending)

    def queued(self) -> list[T]:
        """What waits to be written, in order (nothing is taken)."""
        return self.line.items() + self.pending

    def put(self, item: T, slack: float = 0.0) -> None:
        """``item`` leaves one link latency from now (``slack``: it may wait that much longer
        for company, DelayLine)."""
        if self.instant:
            self.pending.append(item)
            if self._timer is None and self.connection is not None:
                self._timer_due = 0.0
                self._timer = asyncio.get_running_loop().call_soon(self._pump)
            return
        self.line.put(item, slack)
        self._arm()

    def put_back(self, items: list[T]) -> None:
        """Items that must go first, at once (a resumed link's resends)."""
        if self.instant:
            self.pending[:0] = items
        else:
            self.line.put_back(items)
        self._arm()

    def attach(self, connection: Connection) -> None:
        self.connection = connection
        self._arm()

    def detach(self) -> None:
        self.connection = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self) -> None:
        if self.instant:
            if self.pending and self._timer is None and self.connection is not None:
                self._timer_due = 0.0
                self._timer = asyncio.get_running_loop().call_soon(self._pump)
            return
        """A callback for when the head is due (sooner than one already armed, or none)."""
        if self.connection is None:
            return
        due = self.line.next_due()
        if due is None or (self._timer is not None and self._timer_due <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        delay = due - time.monotonic()
        self._timer_due = due
        self._timer = loop.call_soon(self._pump) if delay <= 0 else loop.call_later(delay, self._pump)

    def _pump(self) -> None:
        self._timer = None
        connection = self.connection
        if connection is None or not connection.is_open:
            return  # the items wait for the next connection
        if self.instant:
            due, self.pending = self.pending, []
            if due:
                connection.send_many(self.encode(due))
            return
        due = self.line.take_due(time.monotonic())
        if due:
            connection.send_many(self.encode(due))
        nxt = self.line.next_due()
        if nxt is not None:
            if not due:  # fired before the head was due (a coarse clock): not again at once
                nxt = max(nxt, time.monotonic() + MIN_REARM_S)
            loop = asyncio.get_running_loop()
            self._timer_due = nxt
            self._timer = loop.call_later(max(0.0, nxt - time.monotonic()), self._pump)
