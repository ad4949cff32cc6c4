"""Remote updates held in memory and applied in timestamp order up to the stable time.

Bulk transfer brings each origin gear's payloads in ts order, and with them (or alone, as a
heartbeat) ``through_ts``: the gear will ship nothing more at or below it. The *stable time* is the
least of those over every gear that ships here: every update with a ts at or below it has
arrived. Applying the held payloads up to it in ``(ts, src)`` order (a total order that extends
causality, since a write's ts is above everything its client had seen) is causally consistent.
That is GentleRain's visibility rule (its global stable time) and Saturn's fallback while its
tree is down (paper §6.1); both build on :class:`StableOrder`.

Per origin region a *watermark*, kept in the store's shard 0 and raised in the same Lua call that
applies (``deliver.lua``): every update of that origin up to it has been applied here. It is bulk
transfer's durable position (a sender resumes after it, and payloads at or below it are dropped as
re-sent duplicates) and what attaches wait on (``attach.lua``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from services.region.remote_update import RemoteUpdate
from services.region.store import RegionStore

log = logging.getLogger("stable-order")

MAX_RUN = 512  # updates applied per Redis call at most
NEVER = 2**62  # the stable time where no gear ships here
STORE_RETRY_S = 0.2  # after a store error (its Redis restarting), the next try
Applied = Callable[[str, list[RemoteUpdate]], None]


class Wakeup:
    """Something arrived: an ``asyncio.Event`` for the one delivery loop, whose wait with a
    timeout costs a future and a timer (``asyncio.wait_for`` makes a task per wait, and the loop
    waits once per arrival)."""

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout_s: float) -> None:
        """Until set, or ``timeout_s`` (no error either way)."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = loop.call_later(timeout_s, _release, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class StableOrder:
    def __init__(self, store: RegionStore, on_applied: Applied):
        self.store = store
        self.region = store.region
        self.on_applied = on_applied
        topology = store.topology
        self.origins = [r for r in topology.region_names if r != self.region]
        local = topology.groups_at(self.region)
        # Gears whose payloads come here, per origin region: the stable time hears from all of them.
        self.gears_of = {r: topology.gear_ids(r) for r in self.origins if local & topology.groups_at(r)}
        self.shipping_gears = [g for gear_ids in self.gears_of.values() for g in gear_ids]
        self.ready: dict[str, RemoteUpdate] = {}  # "src|ts" → payload not applied yet
        self.received: dict[str, int] = {}  # origin gear → bulk through_ts
        self.watermarks: dict[str, int] = {}
        self.delivered = 0
        self.stamp = 0  # the last stamp an apply was given: the next goes above it (deliver.lua)
        self.wakeup = Wakeup()  # set when something arrived that may be delivered now
        self.bulk_links: Counter[str] = Counter()  # origin → its gears' bulk links open here

    def bulk_link(self, origin_gear: str, opened: bool) -> None:
        """A gear's bulk link here opened or closed: with none open, its region is gone or cut
        off (Saturn's proxy then does not take its silence on the tree for the tree's)."""
        self.bulk_links[origin_gear.split("/", 1)[0]] += 1 if opened else -1

    async def serve(
        self,
        stop: asyncio.Event,
        step: Callable[[], Awaitable[object]],  # what it returns is not used
        quiet_s: Callable[[], float],
        pause_s: float = 0.0,
    ) -> None:
        """Runs ``step`` after every wake-up, or after ``quiet_s()`` without one, until ``stop``
        (then ``pause_s`` before the next). A store error (its Redis restarting) leaves what was
        not delivered held, and the in-memory watermarks change only after a call succeeded;
        a run applied just before the error is skipped by the watermarks when tried again."""
        while not stop.is_set():
            await self.wakeup.wait(quiet_s())
            self.wakeup.clear()
            try:
                await step()
            except (RedisError, OSError) as exc:
                log.warning("%s: store unavailable (%s); retrying", self.region, exc)
                await asyncio.sleep(STORE_RETRY_S)
                self.wakeup.set()
            if pause_s:
                await asyncio.sleep(pause_s)

    async def load(self) -> None:
        """After a restart: how far delivery had got. Bulk transfer resends what came after."""
        self.watermarks = await self.store.shards[0].watermarks()

    def durable_position(self, origin_region: str) -> int:
        """Every update from ``origin_region`` up to this ts is applied here (or was never meant
        for here): bulk transfer may forget it, and resumes after it."""
        return self.watermarks.get(origin_region, 0)

    def hold(self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]) -> None:
        """Keeps a batch's payloads (those at or below their origin's watermark were applied
        before: bulk transfer resent them after a reconnection) and its gear's promise."""
        for update in updates:
            if update.ts > self.watermarks.get(update.origin_region, 0):
                self.ready[update.key] = update
        self.received[origin_gear] = max(through_ts, self.received.get(origin_gear, 0))

    def stable_time(self) -> int:
        """Every update shipped here with a ts at or below this has been received."""
        return min((self.received.get(g, 0) for g in self.shipping_gears), default=NEVER)

    def on_payloads(self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]) -> None:
        """A batch from bulk transfer (or a heartbeat): held, and the delivery loop woken."""
        self.hold(origin_gear, through_ts, updates)
        self.wakeup.set()

    def stable_of(self, origin: str) -> int:
        """Every update of ``origin`` shipped here with a ts at or below this has been received
        (NEVER for an origin that ships nothing here)."""
        return min((self.received.get(g, 0) for g in self.gears_of.get(origin, ())), default=NEVER)

    def ready_through(self, ts: int) -> list[RemoteUpdate]:
        """The payloads held here up to ``ts``, in timestamp order ((ts, src): a total order)."""
        return sorted((u for u in self.ready.values() if u.ts <= ts), key=lambda u: (u.ts, u.src))

    async def deliver_stable(self) -> int:
        """Everything stable, in (ts, src) order; every origin's watermark follows the stable
        time (an origin that ships nothing here has nothing to wait for either). Returns the
        stable time it applied through: the stable time may have moved on while it applied
        (payloads keep arriving), and what came meanwhile is not applied yet."""
        stable = self.stable_time()
        due = self.ready_through(stable)
        behind = [o for o in self.origins if stable > self.watermarks.get(o, 0)]
        marks = {} if stable >= NEVER else dict.fromkeys(behind, stable)
        await self.apply_batches(due, marks)
        return stable

    async def apply_batches(self, due: list[RemoteUpdate], marks: dict[str, int]) -> None:
        """Applies ``due`` in its order, MAX_RUN at a time, then raises the watermarks to ``marks``."""
        for start in range(0, max(len(due), 1), MAX_RUN):
            part = due[start : start + MAX_RUN]
            last = start + MAX_RUN >= len(due)
            if not part and not (last and marks):
                continue
            applied = await self.apply_in_order(part, marks if last else {})
            self.finish(part, applied, marks if last else {})

    def finish(self, updates: list[RemoteUpdate], applied: list[RemoteUpdate], marks: dict[str, int]) -> None:
        for update in updates:
            self.ready.pop(update.key, None)
        for origin, ts in marks.items():
            self.watermarks[origin] = max(ts, self.watermarks.get(origin, 0))
        self.delivered += len(applied)
        by_origin: dict[str, list[RemoteUpdate]] = {}
        for update in applied:
            by_origin.setdefault(update.origin_region, []).append(update)
        for origin, group in by_origin.items():
            self.on_applied(origin, group)

    async def apply_in_order(self, updates: list[RemoteUpdate], marks: dict[str, int]) -> list[RemoteUpdate]:
        """Consecutive updates of the same shard go in one call; shards one after the other, so
        nothing becomes visible before what precedes it; an update across shards (an atomic
        batch) all at once (``RegionStore.apply_across_shards``). Each call raises its shard's watermarks
        to what it applied (exactly once, per shard); the last, on shard 0, to ``marks``."""
        segments: list[tuple[int | None, list[RemoteUpdate]]] = []  # None: an update across shards
        for update in updates:
            shards = self.store.shards_of(update)
            shard = shards[0] if len(shards) == 1 else None
            if segments and shard is not None and segments[-1][0] == shard:
                segments[-1][1].append(update)
            else:
                segments.append((shard, [update]))
        if not segments or segments[-1][0] != 0:
            segments.append((0, []))  # the watermarks live in shard 0
        applied: set[str] = set()
        for i, (shard, part) in enumerate(segments):
            if shard is None:
                self.stamp = await self.store.apply_across_shards(part[0], self.stamp)
                applied.add(part[0].key)
                continue
            done = {u.origin_region: u.ts for u in part}  # per origin, the last (greatest) ts
            if i == len(segments) - 1:
                done = {o: max(ts, marks.get(o, 0)) for o, ts in done.items()} | {
                    o: ts for o, ts in marks.items() if o not in done
                }
            keys, self.stamp = await self.store.shards[shard].deliver(part, done, self.stamp)
            applied |= keys
        return [u for u in updates if u.key in applied]
