"""Merging a region's shards' label streams into one timestamp order, at a cost that follows the
labels rather than the clock.

Each shard's stream is in ts order, so a label can go once every shard is known to make no
label below it: through the last entry read from it, or through a heartbeat it gave (a time
below which it will make no new label, heartbeat.lua). The merge polled for that every
millisecond: a heartbeat call and a range read per shard, 4,000 store calls a second with two
shards, loaded or idle. With seven regions of two shards that was most of two cores, and Saturn's
capacity in Fig. 7 fell to a fifth of eventual's.

Here each shard is tailed with a blocking read (one call per batch of labels, none while idle),
and a heartbeat is asked only of the shards that hold labels back, at once but once a tick at
most (the paper's sink: every stable label each millisecond): idle, a region costs its stores
nothing between heartbeats; loaded, at most a call per shard and tick, as before. (Waiting a tick
first, for busy shards to pass each other by themselves, held labels 1-10 ms under Fig. 7's
load, where a shard writes a label every few milliseconds.) Every heartbeat period all shards are
asked, and the heartbeat sent is the least of what they promised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

from services import runtime
from services.labelpath.sources import LabelEntry, LabelSource
from services.labelpath.stages import Stage
from services.proto import saturn_pb2
from services.region.store import Shard

MERGE_TICK_S = 0.001  # the shards behind held labels are asked once this often at most
TAIL_BLOCK_S = 1.0  # a tail's blocking read returns this often when its shard is idle
UPDATE_KINDS = (b"u", b"U", b"t", b"T")  # an update's label entry starts so (pump.parse_entry)

Parse = Callable[[bytes], saturn_pb2.TreeLabel]


class ShardMerge:
    """One run of the merge over ``shards`` from ``cursors`` (each shard forwarded through its
    cursor). ``cursors`` is updated in place as labels leave: it is what the pump saves and trims.

    ``read_to[k]``: the last entry read from shard k; ``known[k]``: shard k makes no new label at
    or below it (never below ``read_to[k]``); ``held[k]``: labels read and not yet sent."""

    def __init__(self, shards: list[Shard], sources: list[LabelSource], cursors: list[int], parse: Parse,
                 read: Stage) -> None:  # fmt: skip
        self.shards = shards
        self.sources = sources  # where each shard's labels are read (sources.py)
        self.read = read  # where the time a label is read is observed (stages.py)
        self.cursors = cursors
        self.parse = parse
        self.read_to = list(cursors)
        self.known = list(cursors)
        self.held: list[deque[tuple[int, bytes]]] = [deque() for _ in shards]
        self.news = asyncio.Event()

    def ingest(self, k: int, labels: list[LabelEntry], covered: int) -> None:
        """Labels read from shard k (a blocking read's or a heartbeat's: the two may overlap)
        and the time they cover."""
        fresh = [(ts, raw) for ts, raw in labels if ts > self.read_to[k]]
        if fresh:
            src = self.shards[k].gear_id
            self.read.each((src, ts) for ts, raw in fresh if raw[:1] in UPDATE_KINDS)
            self.held[k].extend(fresh)
            self.news.set()
        # Nothing unread is left at or below what was covered (entries without a label included):
        # the next read starts after it.
        self.read_to[k] = max(self.read_to[k], covered, fresh[-1][0] if fresh else 0)
        self.known[k] = max(self.known[k], self.read_to[k])

    def stable(self) -> int:
        return min(self.known)

    def take_stable(self) -> list[saturn_pb2.TreeLabel]:
        """Every held label at or below the stable time, in (ts, src) order; the cursors move."""
        cut = self.stable()
        labels = []
        for k, held in enumerate(self.held):
            while held and held[0][0] <= cut:
                ts, raw = held.popleft()
                labels.append(self.parse(raw))
                self.cursors[k] = ts
        labels.sort(key=lambda label: (label.ts, label.src))
        return labels

    def holding(self) -> bool:
        return any(self.held)

    def behind(self) -> list[int]:
        """The shards that hold the held labels back."""
        highest = max(held[-1][0] for held in self.held if held)
        return [k for k, known in enumerate(self.known) if known < highest]

    async def ask(self, shards: list[int]) -> None:
        """A heartbeat of each of ``shards``, with the entries it covers, in one round trip each."""
        replies = await asyncio.gather(*(self.sources[k].heartbeat_after(self.read_to[k]) for k in shards))
        for k, (covered, labels) in zip(shards, replies, strict=True):
            self.ingest(k, labels, covered)

    async def tail(self, k: int, stop: asyncio.Event) -> None:
        """Shard k's stream as it grows: a blocking read returns every label written since the
        last one (an entry's ts covers its shard up to it: a gear's labels only grow)."""
        source = self.sources[k]
        while not stop.is_set():
            labels, covered = await source.labels_after(self.read_to[k], TAIL_BLOCK_S)
            if labels or covered > self.read_to[k]:
                self.ingest(k, labels, covered)

    async def wait_news(self, stop: asyncio.Event, timeout_s: float) -> None:
        """Until a tail brings labels, the process stops, or ``timeout_s`` (a heartbeat is due)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, timeout_s)):
                await runtime.first_or_stop(stop, self.news.wait(), None)
        self.news.clear()
