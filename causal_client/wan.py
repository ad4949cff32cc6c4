"""WAN emulation (DESIGN §8): hold each cross-site message for the one-way latency of its link.

One small layer used by every component that sends across sites: bulk-data streams, their acks,
label streams and client calls to a remote region. FIFO order is kept even with jitter, because a
message is never released before the one sent ahead of it. No root or kernel features are needed,
and with zero latency it adds nothing. It lives in the client library because client calls to a
remote region need it too; the services import it from here.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class Link:
    """The emulated properties of one directed site-to-site link."""

    __slots__ = ("_last_release", "jitter_s", "latency_s")

    def __init__(self, latency_ms: float, jitter_ms: float = 0.0):
        self.latency_s = latency_ms / 1000.0
        self.jitter_s = jitter_ms / 1000.0
        self._last_release = 0.0

    @property
    def is_instant(self) -> bool:
        return self.latency_s == 0 and self.jitter_s == 0

    def release_time(self, sent_at: float) -> float:
        """When a message sent at ``sent_at`` (monotonic seconds) arrives; never before the last."""
        jitter = random.uniform(0, self.jitter_s) if self.jitter_s else 0.0
        self._last_release = max(self._last_release, sent_at + self.latency_s + jitter)
        return self._last_release

    def sleep_one_way(self) -> None:
        """Blocking delay for one leg of a synchronous call (gevent-friendly when patched).

        Calls are independent of each other, so no FIFO coupling here: concurrent calls from
        several threads each pay one latency, not the sum."""
        if not self.is_instant:
            time.sleep(self.latency_s + (random.uniform(0, self.jitter_s) if self.jitter_s else 0.0))


class DelayLine(Generic[T]):
    """An asyncio FIFO whose items come out one link-latency after they went in.

    An item put with ``slack`` may wait that much longer, until something behind it is due: it
    then leaves with that, in one message. For messages that only need to arrive eventually
    (heartbeats), so that several share one send and one wake-up at the receiver."""

    def __init__(self, link: Link):
        self.link = link
        self._items: deque[tuple[float, float, T]] = deque()  # (release, deadline, item)
        self._wakeup = asyncio.Event()

    def put(self, item: T, slack: float = 0.0) -> None:
        release = self.link.release_time(time.monotonic())
        self._items.append((release, release + slack, item))
        self._wakeup.set()

    def __len__(self) -> int:
        return len(self._items)

    def _head_due(self) -> float:
        """When the head must leave: its deadline, or earlier if an item behind it is due."""
        release, deadline, _ = self._items[0]
        if deadline == release:
            return release
        return min(d for _, d, _ in self._items)

    async def get(self) -> T:
        while True:
            if self._items:
                delay = self._head_due() - time.monotonic()
                if delay <= 0:
                    return self._items.popleft()[2]
                if self._items[0][0] == self._items[0][1]:
                    await asyncio.sleep(delay)  # later items are never due before the head
                else:  # a slack head: an item put meanwhile may be due sooner
                    self._wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), delay)
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    async def get_due(self) -> list[T]:
        """The head once it is due, with every item whose latency has passed behind it (in
        order): when the consumer falls behind, or slack items gathered, they leave as one."""
        due = [await self.get()]
        now = time.monotonic()
        while self._items and self._items[0][0] <= now:
            due.append(self._items.popleft()[2])
        return due
