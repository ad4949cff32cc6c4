"""One local gear's outgoing stream, read once for all the regions it ships to.

A gear's stream holds every update the gear took, whatever its group; each destination wants
only the groups it replicates. Reading the stream once per destination (six times with seven
regions) and sending each destination a batch for every write, most of them empty after
filtering, made the bulk path cost more CPU than the store itself; so one ``GearTail`` per gear
reads the stream (and, when a destination wants them, heartbeats: one per gear and period, not
one per destination) into memory, and each destination's shipper takes what is new from there.

A shipper whose position is below what memory holds (it reconnects after a long absence, or it
fell so far behind that memory let go) reads Redis itself until it has caught up: memory is a
cache of the stream, never the only copy (the stream is trimmed only below what every
destination acknowledged).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import Callable

from redis.exceptions import RedisError

from services import runtime
from services.labelpath.sources import LabelEntry, StreamLabels
from services.region import gears
from services.region.store import Shard

log = logging.getLogger("bulk-tail")

# A bulk entry's fields (a label-only entry has no payload, and a group no region is sent: write.lua)
GROUP, PAYLOAD, LABEL = (f.encode() for f in (gears.GROUP_FIELD, gears.PAYLOAD_FIELD, gears.LABEL_FIELD))
READ_COUNT = 512  # stream entries per read at most
HELD_MAX = 50_000  # entries kept in memory at most (beyond: the slowest shipper reads Redis)
IDLE_BLOCK_S = 0.5  # without heartbeats: how long a read of an idle stream blocks
STORE_RETRY_S = 0.2  # after a store error (its Redis restarting), the next read

Entry = tuple[int, bytes, bytes, bytes]  # (ts, group, payload, label): b"" where the entry has none


class GearTail:
    """The stream's recent entries and how far they cover (``through``: nothing at or below it
    will be written any more), shared by the gear's shippers."""

    def __init__(self, shard: Shard, heartbeat_s: float, on_heartbeat: Callable[[], None] = lambda: None):
        self.shard = shard
        self.heartbeat_s = heartbeat_s
        self.on_heartbeat = on_heartbeat
        self.ts: list[int] = []  # the held entries' ts, ascending (bisect)
        self.entries: list[Entry] = []
        self.floor = 0  # every entry above it is held
        self.through = 0
        self.positions: dict[object, int] = {}  # shippers reading from memory -> their position
        self.limited: set[object] = set()  # readers that take only what the shippers sent (the sink)
        self.stalled: set[object] = set()  # shippers waiting for their window: they hold no label back
        self.heartbeats_wanted: Callable[[], bool] = lambda: False
        self.changed = asyncio.Condition()

    async def run(self, stop: asyncio.Event) -> None:
        """Reads the stream as it grows; when idle and a destination wants them, heartbeats. A
        store that restarts (it keeps what it acknowledged) is read again where the tail was."""
        while not stop.is_set():
            try:
                await self._read(stop)
            except (RedisError, OSError) as exc:
                log.warning(
                    "%s: store unavailable (%s); retrying in %.1f s", self.shard.gear_id, exc, STORE_RETRY_S
                )
                await runtime.sleep_or_stop(stop, STORE_RETRY_S)

    async def _read(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wanted = self.heartbeats_wanted()
            block_s = self.heartbeat_s if wanted else IDLE_BLOCK_S
            raw = await self.shard.stream_after(gears.BULK_STREAM, self.through, READ_COUNT, block_s=block_s)
            if raw:
                through = raw[-1][0]
            elif wanted:  # with the entries written since the read, which the heartbeat covers
                through, raw = await self.shard.heartbeat_after(gears.BULK_STREAM, self.through, READ_COUNT)
                self.on_heartbeat()
            else:
                continue
            for ts, fields in raw:
                self.ts.append(ts)
                self.entries.append(_entry(ts, fields))
            self.through = max(self.through, through)
            self._let_go()
            async with self.changed:
                self.changed.notify_all()

    def _let_go(self) -> None:
        """Drops what every shipper reading from memory has taken (and, past ``HELD_MAX``, the
        oldest: a shipper left below the floor reads Redis). Every entry above the new floor is
        still held: those at or below ``low`` are all dropped, and a cut past it ends at an entry."""
        low = min(min(self.positions.values(), default=self.through), self.through)
        cut = max(bisect.bisect_right(self.ts, low), len(self.ts) - HELD_MAX)
        floor = low
        if cut > 0:
            floor = max(low, self.ts[cut - 1])
            del self.ts[:cut], self.entries[:cut]
        self.floor = max(self.floor, floor)

    async def after(
        self, shipper: object, position: int, wait_s: float, sent_only: bool = False
    ) -> tuple[list[Entry], int] | None:
        """The entries after ``position`` and the time they cover, waiting up to ``wait_s`` for
        news when there is none; None when ``position`` is below what memory holds (the shipper
        reads Redis: ``catch_up``). ``sent_only`` (the label sink): only what every shipper
        reading from memory has written to its destination (``sent``)."""
        if position < self.floor:
            self.positions.pop(shipper, None)
            return None
        moved = position > self.positions.get(shipper, 0)
        self.positions[shipper] = position  # a shipper's: everything up to it is written
        if sent_only:
            self.limited.add(shipper)
        cover = self.released if sent_only else self.covered
        async with self.changed:
            if moved and self.limited and not sent_only:
                self.changed.notify_all()  # the sink may take more now
            # asyncio.timeout, not asyncio.wait_for: on Python 3.11 wait_for swallows a cancellation
            # that comes as the wait ends, and a shipper whose session ended then read on for good.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self.changed.wait_for(lambda: cover() > position)
        if position < self.floor:  # let go of meanwhile (memory was full)
            self.positions.pop(shipper, None)
            return None
        upto = cover()
        start = bisect.bisect_right(self.ts, position)
        end = bisect.bisect_right(self.ts, upto)
        if end - start > READ_COUNT:  # a batch's worth: it covers up to its last entry
            return self.entries[start : start + READ_COUNT], self.ts[start + READ_COUNT - 1]
        return self.entries[start:end], max(upto, position)

    def covered(self) -> int:
        return self.through

    def sent(self) -> int | None:
        """What every shipper reading from memory has written to its connection (None: no shipper
        is): a label beyond it may not leave yet, or a region stopped now would leave its payload
        unsent while the label went on, and every later label elsewhere would wait for it
        (bulk/receiver.py). A shipper catching up from Redis holds nothing back."""
        holding = self.limited | self.stalled  # the sink itself, and shippers waiting for their window
        shippers = [p for reader, p in self.positions.items() if reader not in holding]
        return min(shippers) if shippers else None

    async def stall(self, shipper: object, stalled: bool) -> None:
        """A shipper waits for its window (its link is slow or cut) or is done waiting. While it
        waits it holds no label back: a partitioned link would otherwise hold the region's labels
        to every other region too (a region that dies meanwhile leaves that destination waiting
        for payloads it could not have had anyway)."""
        if stalled:
            self.stalled.add(shipper)
            async with self.changed:
                self.changed.notify_all()  # the sink may take more now
        else:
            self.stalled.discard(shipper)

    def released(self) -> int:
        sent = self.sent()
        return self.through if sent is None else min(self.through, sent)

    def leave(self, shipper: object) -> None:
        """The shipper's session ended: it holds nothing in memory any more."""
        self.positions.pop(shipper, None)
        self.stalled.discard(shipper)

    async def catch_up(self, position: int) -> tuple[list[Entry], int]:
        """Entries after ``position`` read from Redis, and the time they cover. A read that comes
        back short covers everything up to the floor too: the tail had read all of that before
        the floor rose, so it was in Redis when this read ran."""
        floor = self.floor
        raw = await self.shard.stream_after(gears.BULK_STREAM, position, READ_COUNT)
        entries = [_entry(ts, fields) for ts, fields in raw]
        through = entries[-1][0] if entries else position
        if len(entries) < READ_COUNT:
            through = max(through, floor)
        return entries, through


def _entry(ts: int, fields: dict[bytes, bytes]) -> Entry:
    return ts, fields[GROUP], fields.get(PAYLOAD, b""), fields.get(LABEL, b"")


class TailLabels:
    """A shard's labels as its ``GearTail`` reads them (the label sink in the bulk sender's
    process, under ``gears.labels_stream``'s one stream): the sink is one more reader of the
    tail, so a write costs the process one read for its payload and its label together."""

    def __init__(self, tail: GearTail) -> None:
        self.tail = tail
        self.own = StreamLabels(tail.shard, gears.BULK_STREAM)  # heartbeats, in one round trip

    async def labels_after(self, after_ts: int, block_s: float) -> tuple[list[LabelEntry], int]:
        """Labels whose payloads every connected destination has been sent (``GearTail.sent``)."""
        found = await self.tail.after(self, after_ts, block_s, sent_only=True)
        entries, through = found if found is not None else await self.tail.catch_up(after_ts)
        return [(ts, label) for ts, _, _, label in entries if label], through

    async def heartbeat_after(self, after_ts: int) -> tuple[int, list[LabelEntry]]:
        """A heartbeat covers no label whose payload is not sent yet: it promises less then."""
        stable, entries = await self.own.heartbeat_after(after_ts)
        sent = self.tail.sent()
        held = [ts for ts, _ in entries if sent is not None and ts > sent]
        if held:
            stable = max(held[0] - 1, after_ts)
            entries = [entry for entry in entries if entry[0] <= stable]
        return stable, entries
