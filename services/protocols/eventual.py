"""Eventual consistency: apply on arrival. The throughput upper bound and visibility lower bound.

Each local shard takes its part of the stream on its own (a lane: a queue and a task per shard),
so a slow shard (its master paused, throttled or restarting) holds back its own part and nothing
else: the other shards' remote updates keep becoming visible (Occult's "no slowdown cascades";
``loadtest check --nemesis slow-shard`` measures it). Nothing orders them across shards here,
which is what eventual allows. A shard records how far it got per origin gear atomically with
what it applied (``saturn_apply``), so bulk transfer is acknowledged only up to what every shard
applied (``durable_position``), and a batch re-sent after a crash is skipped shard by shard. An
update spanning shards (an atomic batch) waits for the lanes to drain and is applied across them
at once (``RegionStore.apply_remote``)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from causal_client.errors import CausalError
from services.protocols.base import AppliedCallback, Protocol
from services.region.remote_update import RemoteUpdate
from services.region.store import RegionStore, Shard

log = logging.getLogger("eventual")

LANE_DEPTH = 1024  # parts queued on one shard before the streams that feed it wait
RETRY_S = 0.2  # after a store error (its Redis restarting), the part is tried again
STUCK_S = 0.05  # a lane busy with one part this long is behind: batches stop waiting for it


@dataclass
class Part:
    origin_gear: str
    through_ts: int
    updates: list[RemoteUpdate]
    on_applied: AppliedCallback
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class Lane:
    """One shard's queue of parts, applied in arrival order (per origin gear: the stream's)."""

    shard: Shard
    queue: asyncio.Queue[Part] = field(default_factory=asyncio.Queue)
    applied: dict[str, int] = field(default_factory=dict)  # origin gear → through_ts applied here
    busy_since: float | None = None  # when the part it applies now was taken

    def stuck(self) -> bool:
        """Busy with one part for long (its master paused, restarting)."""
        return self.busy_since is not None and time.monotonic() - self.busy_since > STUCK_S

    def behind(self) -> bool:
        """Stuck, or with parts waiting (catching up after it was): not worth a batch's wait."""
        return self.stuck() or self.queue.qsize() > 0

    async def run(self) -> None:
        while True:
            part = await self.queue.get()
            self.busy_since = time.monotonic()
            while True:
                try:
                    done = set(await self.shard.apply(part.origin_gear, part.through_ts, part.updates))
                    break
                except (RedisError, OSError, CausalError) as exc:  # restarting, failing over, full
                    log.warning("shard %s: store unavailable (%s); retrying", self.shard.gear_id, exc)
                    await asyncio.sleep(RETRY_S)
                except Exception:  # a bug: said loudly, and the part is kept (never dropped)
                    log.exception(
                        "shard %s: applying a part of %s failed", self.shard.gear_id, part.origin_gear
                    )
                    await asyncio.sleep(1.0)
            self.applied[part.origin_gear] = max(part.through_ts, self.applied.get(part.origin_gear, 0))
            if done:
                part.on_applied([u for u in part.updates if u.ts in done])
            self.busy_since = None
            if not part.done.done():
                part.done.set_result(None)
            self.queue.task_done()


class Eventual(Protocol):
    name = "eventual"

    def __init__(self, store: RegionStore):
        super().__init__(store)
        self.lanes: list[Lane] | None = None  # started by the first batch, in the receiver's loop
        self.resumed: dict[str, int] = {}  # origin gear → the position its link resumed after
        self.tasks: list[asyncio.Task[None]] = []

    def _lanes(self) -> list[Lane]:
        if self.lanes is None:
            self.lanes = [Lane(shard) for shard in self.store.shards]
            self.tasks = [asyncio.ensure_future(lane.run()) for lane in self.lanes]
        return self.lanes

    async def accept_payloads(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate], on_applied: AppliedCallback
    ) -> None:
        """Each shard's part into its lane (every shard's, even empty: each keeps its own
        position); returns once the lanes that keep up have applied theirs (so the batch's
        acknowledgement covers it, as without lanes), not waiting for a lane that is behind
        (STUCK_S) or LANE_DEPTH parts deep. A batch with an update across shards: after it
        is applied, the lanes drained first."""
        lanes = self._lanes()
        if any(len(self.store.shards_of(u)) > 1 for u in updates):
            await asyncio.gather(*(lane.queue.join() for lane in lanes))
            applied = await self.store.apply_remote(origin_gear, through_ts, updates)
            for lane in lanes:
                lane.applied[origin_gear] = max(through_ts, lane.applied.get(origin_gear, 0))
            if applied:
                on_applied(applied)
            return
        parts: list[list[RemoteUpdate]] = [[] for _ in lanes]
        for update in updates:
            parts[self.store.shards_of(update)[0]].append(update)
        waited: dict[asyncio.Future[None], Lane] = {}
        for lane, updates_here in zip(lanes, parts, strict=True):
            part = Part(origin_gear, through_ts, updates_here, on_applied)
            if not lane.behind():
                waited[part.done] = lane
            lane.queue.put_nowait(part)
        pending = set(waited)
        while pending:  # the lanes keeping up; one that gets stuck meanwhile is let go
            _, still = await asyncio.wait(pending, timeout=STUCK_S)
            pending = {f for f in still if not waited[f].stuck()}
        for lane in lanes:  # backpressure: a lane far behind holds the streams that feed it
            while lane.queue.qsize() > LANE_DEPTH:
                await asyncio.sleep(RETRY_S / 4)

    async def resume_position(self, origin_gear: str) -> int:
        position = await super().resume_position(origin_gear)
        self.resumed[origin_gear] = max(position, self.resumed.get(origin_gear, 0))
        return position

    def durable_position(self, origin_gear: str, through_ts: int) -> int:
        """What every shard has applied of ``origin_gear`` (the sender may forget up to it)."""
        floor = self.resumed.get(origin_gear, 0)
        if self.lanes is None:
            return floor
        return max(floor, min(lane.applied.get(origin_gear, 0) for lane in self.lanes))
