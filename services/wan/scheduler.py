"""One direction of a site pair's link: every connection's bytes leave at the link's rate, one
chunk at a time, in arrival order (FIFO), or critical chunks ahead of bulk ones (``priority``,
Vivace's prioritised messages), never one chunk cut into by another.

A chunk of n bytes takes n / rate to leave (its serialization on the wire); while one leaves,
others queue, which is what congestion is. The pacing keeps a virtual clock (``free_at``) so
that the rate holds over time however late the event loop wakes up.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

CRITICAL, BULK = "critical", "bulk"
# A chunk leaves whole: a critical message waits for the one leaving at most. About 2 ms of the
# link each (at least an Ethernet frame, at most 64 KB): smaller costs CPU per chunk, larger
# makes metadata wait behind bulk (16 KB at 8 Mbit/s is 16 ms).
CHUNK_S, MIN_CHUNK_BYTES, MAX_CHUNK_BYTES = 0.002, 1500, 64 * 1024


@dataclass
class Chunk:
    cls: str
    data: bytes
    deliver: Callable[[bytes], None]


class LinkScheduler:
    def __init__(self, rate_mbit: float, priority: bool):
        self.rate_bytes_s = rate_mbit * 1e6 / 8
        self.chunk_bytes = int(min(MAX_CHUNK_BYTES, max(MIN_CHUNK_BYTES, self.rate_bytes_s * CHUNK_S)))
        self.priority = priority
        self.queues: dict[str, deque[Chunk]] = {CRITICAL: deque(), BULK: deque()}
        self.fifo: deque[Chunk] = deque()  # without priority: one queue, in arrival order
        self.sent = {CRITICAL: 0, BULK: 0}  # bytes that left, by class
        self.free_at = 0.0  # the link's virtual clock: when the last chunk has left
        self._wakeup = asyncio.Event()

    def submit(self, cls: str, data: bytes, deliver: Callable[[bytes], None]) -> None:
        """Queues ``data`` (cut into chunks); ``deliver`` is called with each chunk as it leaves."""
        for start in range(0, len(data), self.chunk_bytes):
            chunk = Chunk(cls, data[start : start + self.chunk_bytes], deliver)
            (self.queues[cls] if self.priority else self.fifo).append(chunk)
        self._wakeup.set()

    def queued_bytes(self) -> int:
        return sum(len(c.data) for q in (*self.queues.values(), self.fifo) for c in q)

    def next_chunk(self) -> Chunk | None:
        """The chunk that leaves next: the oldest critical one first under priority."""
        if not self.priority:
            return self.fifo.popleft() if self.fifo else None
        for cls in (CRITICAL, BULK):
            if self.queues[cls]:
                return self.queues[cls].popleft()
        return None

    def departure(self, size: int, now: float, was_idle: bool) -> float:
        """When a chunk of ``size`` bytes has left; the clock moves. A link that was busy sends
        it right after the previous chunk, even if this loop woke late (it then catches up: the
        rate holds); one that was idle, from ``now``."""
        start = max(self.free_at, now) if was_idle else self.free_at
        self.free_at = start + size / self.rate_bytes_s
        return self.free_at

    async def run(self, stop: asyncio.Event) -> None:
        was_idle = True
        while not stop.is_set():
            chunk = self.next_chunk()
            if chunk is None:
                self._wakeup.clear()
                await self._wakeup.wait()
                was_idle = True
                continue
            leaves = self.departure(len(chunk.data), time.monotonic(), was_idle)
            was_idle = False
            delay = leaves - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.sent[chunk.cls] += len(chunk.data)
            chunk.deliver(chunk.data)
