"""C3's causality layer, receiving side: remote updates made visible as soon as their own
dependencies hold, whatever else is waiting (docs/PROTOCOLS.md, "C3").

Per origin region o (one that ships something here):

- ``RoC[o]``, the completed-operations clock, is a watermark: every update of o meant for here
  with a ts at or below it is applied. It is the least of bulk transfer's stable time for o (every
  payload of o up to it has arrived: the payload channel is reliable, so a lost label can never
  make RoC pass an update) and the ts just below o's first update not applied yet. It is the
  region's watermark ``wm[o]``: attaches wait on it and bulk transfer resumes after it.
- An update u of o is applied once its payload and its label are here, every update of o before
  it is applied (a label's vector names o's own updates up to u's ts: one origin's updates are
  applied in order), and for every other origin j, ``RoC[j] >= u.deps[j]``. Updates of different
  origins do not wait for one another unless the vector says so: C3's parallel execution.
  ``SATURN_CONCURRENT_APPLY=0`` applies them one at a time in ts order, each waiting for every
  one below it (and migrations with them), as C3's paper says Saturn must (for the comparison).
- The executing-operations clock ``RoE`` (the vector every label made here carries) rises,
  before an update is handed to the store, to its ts for its origin and to its own vector for
  every other region (else a dependency on an update this region does not replicate would be
  lost on the way: partial replication's transitivity); likewise for a migration executed here
  and for a client attached here with a past up to some ts. It is kept in the store
  (``roe:`` fields beside the watermarks) so that a restart never lowers it.
- A migration label (metadata only, sent to its target alone) is executed once its vector holds
  and every update of its origin before it is applied; then ``migrated:o`` rises to its ts, which
  the client's attach waits for.
- A payload whose label was lost (a receiver restarted with labels in memory) is noticed when the
  label channel from its origin has passed its ts (labels and heartbeats travel in ts order);
  it then waits for everything below its ts (timestamp order: never wrong, only slower).

Every wait is for updates with a smaller ts than the waiting one (a vector entry is below its
label's ts: sender.py), so waits never form a cycle.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from services.proto import saturn_pb2
from services.region import gears
from services.region.remote_update import RemoteUpdate
from services.region.stable_order import NEVER, Applied, StableOrder
from services.region.store import RegionStore

log = logging.getLogger("c3-applier")

IDLE_CHECK_S = 1.0  # with nothing arriving, the loop wakes this often anyway
REPORT_EVERY_S = 5.0  # while updates wait, why is logged this often
HEARTBEATS_LINGER_S = 1.0  # heartbeats stay asked for this long after nothing waits


@dataclass
class Pending:
    """The updates of one origin not applied yet, in ts order, and how many this round applies."""

    ts: list[int] = field(default_factory=list)
    taken: int = 0

    def first(self) -> int:
        return self.ts[self.taken] if self.taken < len(self.ts) else NEVER


class C3Applier(StableOrder):
    def __init__(self, store: RegionStore, on_applied: Applied, concurrent: bool = True):
        super().__init__(store, on_applied)
        self.concurrent = concurrent
        self.labels: dict[str, saturn_pb2.TreeLabel] = {}  # "src|ts" → update label held
        self.migrations: list[saturn_pb2.TreeLabel] = []  # migration labels for here, not executed
        self.channel: dict[str, int] = {}  # origin → every label of it up to this ts has come
        self.roe: dict[str, int] = {}
        self.saved_roe: dict[str, int] = {}
        self.migrated: dict[str, int] = {}
        self.reported = time.monotonic()
        self.on_change: Callable[[], None] | None = None  # the need of heartbeats changed
        self.wants_heartbeats = False
        self.idle_since = time.monotonic()

    async def load(self) -> None:
        """After a restart: RoC and the migrations executed from shard 0; RoE at least what any
        shard has applied (an update applied is visible, so later labels depend on it)."""
        marks = await asyncio.gather(*(s.watermarks() for s in self.store.shards))
        first = marks[0]
        self.watermarks = {o: first[o] for o in self.origins if o in first}
        self.migrated = _prefixed(first, gears.MIGRATED_PREFIX)
        self.roe = _prefixed(first, gears.ROE_PREFIX)
        self.saved_roe = dict(self.roe)
        for shard_marks in marks:
            for origin in self.origins:
                self.raise_roe(origin, shard_marks.get(origin, 0))

    # -- the sending side's view ---------------------------------------------------------------
    def dependencies(self) -> dict[str, int]:
        """RoE: what every label made here from now on depends on."""
        return {r: ts for r, ts in self.roe.items() if ts}

    def raise_roe(self, region: str, ts: int) -> None:
        if region != self.region and ts > self.roe.get(region, 0):
            self.roe[region] = ts

    def note_attach(self, ts: int) -> None:
        """A client attached here with a past up to ``ts`` (read elsewhere): later labels made
        here depend on everything up to it, from every region."""
        for origin in self.origins:
            self.raise_roe(origin, ts)

    def unsaved_roe(self) -> dict[str, int]:
        """The RoE entries raised since they were last stored."""
        return {r: ts for r, ts in self.roe.items() if ts > self.saved_roe.get(r, 0)}

    async def persist(self) -> None:
        roe = self.unsaved_roe()
        if roe:
            await self.store.shards[0].deliver([], _prefixed_marks(gears.ROE_PREFIX, roe))
            self.saved_roe.update(roe)

    # -- labels in ------------------------------------------------------------------------------
    async def accepts(self, sender: str, epoch: int) -> str | None:
        return None if sender in self.origins else f"{sender!r} is not another region of this topology"

    def on_labels(self, sender: str, batch: saturn_pb2.LabelBatch, epoch: int, raw: bytes = b"") -> None:
        for label in batch.labels:
            if label.type == saturn_pb2.TREE_UPDATE:
                key = f"{label.src}|{label.ts}"
                if label.ts > self.watermarks.get(sender, 0) and key not in self.labels:
                    self.labels[key] = label
            elif (
                label.type == saturn_pb2.TREE_MIGRATION
                and label.target == self.region
                and label.ts > self.migrated.get(sender, 0)
            ):
                self.migrations.append(label)
            self.channel[sender] = max(self.channel.get(sender, 0), label.ts)
        self.wakeup.set()

    def on_link_lost(self, sender: str, epoch: int) -> None:
        """Nothing to do: a lost label is noticed per payload (the module's last point)."""

    # -- applying -------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """A round after each arrival, at most one per ``[stabilization] period_s`` (as
        GentleRain's): a round per heartbeat and label batch cost a store call each."""
        await self.serve(
            stop, self.deliver_ready, lambda: IDLE_CHECK_S, self.store.topology.stabilization.period_s
        )

    def deps_of(self, update: RemoteUpdate) -> dict[str, int] | None:
        """The update's vector; None while its label may still come."""
        label = self.labels.get(update.key)
        if label is not None:
            return dict(label.deps)
        if self.channel.get(update.origin_region, 0) >= update.ts:  # its label was lost
            return dict.fromkeys(self.origins, update.ts - 1)
        return None

    async def deliver_ready(self) -> None:
        stable = {o: self.stable_of(o) for o in self.gears_of}
        ordered = sorted(self.ready.values(), key=lambda u: (u.ts, u.src))
        pending: dict[str, Pending] = {o: Pending() for o in self.gears_of}
        for update in ordered:
            pending[update.origin_region].ts.append(update.ts)

        def completed(origin: str) -> int:
            """RoC once what is due so far is applied (NEVER: nothing of it comes here)."""
            if origin not in stable:
                return NEVER
            return min(stable[origin], pending[origin].first() - 1)

        def holds(deps: dict[str, int], origin: str) -> bool:
            return all(completed(r) >= ts for r, ts in deps.items() if r not in (origin, self.region))

        def ready(update: RemoteUpdate) -> bool:
            origin = update.origin_region
            if update.ts != pending[origin].first() or stable[origin] < update.ts - 1:
                return False  # an update of its origin before it is not applied, or not here yet
            deps = self.deps_of(update)
            return deps is not None and holds(deps, origin)

        due: list[RemoteUpdate] = []
        if self.concurrent:
            waiting = ordered
            progress = True
            while progress:  # an update may free one before it in ts order (another origin)
                progress, left = False, []
                for update in waiting:
                    if ready(update):
                        due.append(update)
                        pending[update.origin_region].taken += 1
                        progress = True
                    else:
                        left.append(update)
                waiting = left
        else:  # one at a time in ts order (every wait is for a smaller ts: it cannot deadlock)
            for update in ordered:
                if not ready(update):
                    break
                due.append(update)
                pending[update.origin_region].taken += 1
        taken = {u.key for u in due}
        left = [u for u in ordered if u.key not in taken]
        # serially, a migration also waits for every update held below its ts
        first_left = NEVER if self.concurrent or not left else left[0].ts
        executed = self.executable_migrations(completed, holds, first_left)

        for update in due:  # RoE first: once applied, an update may be read and depended on
            self.raise_roe(update.origin_region, update.ts)
            for region, ts in (self.deps_of(update) or {}).items():
                self.raise_roe(region, ts)
        migrated: dict[str, int] = {}
        for label in executed:
            origin = _origin(label)
            self.raise_roe(origin, label.ts)
            for region, ts in label.deps.items():
                self.raise_roe(region, ts)
            migrated[origin] = max(migrated.get(origin, 0), label.ts)

        self.report_waiting(left, completed, stable)
        self.need_heartbeats(bool(left) or bool(self.migrations))
        marks = {o: completed(o) for o in stable}
        marks = {o: ts for o, ts in marks.items() if ts < NEVER and ts > self.watermarks.get(o, 0)}
        roe = self.unsaved_roe()
        marks |= _prefixed_marks(gears.MIGRATED_PREFIX, migrated) | _prefixed_marks(gears.ROE_PREFIX, roe)
        if not due and not marks:
            return
        await self.apply_batches(due, marks)
        self.saved_roe.update(roe)
        for origin, ts in migrated.items():
            self.migrated[origin] = max(self.migrated.get(origin, 0), ts)
        self.forget_labels(due)

    def need_heartbeats(self, waiting: bool) -> None:
        """Bulk heartbeats (every gear's clock, ``[stabilization] heartbeat_s``) move RoC for
        origins that send nothing; they cost every sender and this receiver CPU, so they are
        asked for while something waits here, and given up after ``HEARTBEATS_LINGER_S`` with
        nothing waiting (an origin that is quiet meanwhile moves once a second, bulk transfer's
        own progress notices)."""
        now = time.monotonic()
        if waiting:
            self.idle_since = now
        wanted = waiting or now - self.idle_since < HEARTBEATS_LINGER_S
        if wanted != self.wants_heartbeats:
            self.wants_heartbeats = wanted
            if self.on_change is not None:
                self.on_change()

    def report_waiting(self, left: list[RemoteUpdate], completed, stable: dict[str, int]) -> None:
        """Every REPORT_EVERY_S while updates wait (``left``, in ts order), why the first of each
        origin waits (a log line for whoever wonders why a region shows nothing new)."""
        now = time.monotonic()
        if now - self.reported < REPORT_EVERY_S:
            return
        self.reported = now
        firsts: dict[str, RemoteUpdate] = {}
        for update in left:
            firsts.setdefault(update.origin_region, update)
        for origin, update in firsts.items():
            deps = self.deps_of(update)
            if deps is None:
                why = f"its label (label channel through {self.channel.get(origin, 0)})"
            else:
                short = {r: (ts, completed(r)) for r, ts in deps.items() if r not in (origin, self.region)}
                why = f"dependencies (needed, completed): {short}; {origin} stable through {stable[origin]}"
            log.info("%s: %d held; %s waits for %s", self.region, len(self.ready), update.key, why)

    def executable_migrations(self, completed, holds, first_left: int) -> list[saturn_pb2.TreeLabel]:
        """Migration labels whose origin's earlier updates and whose vector hold (serially: also
        no update below their ts is still waiting)."""
        executed, kept = [], []
        for label in self.migrations:
            origin = _origin(label)
            free = label.ts < first_left and completed(origin) >= label.ts - 1
            if free and holds(dict(label.deps), origin):
                executed.append(label)
            else:
                kept.append(label)
        self.migrations = kept
        return executed

    def forget_labels(self, due: list[RemoteUpdate]) -> None:
        """Labels of applied updates go, and so do any at or below their origin's watermark (a
        label that came after its update was applied, as a lost label's fallback allows)."""
        for update in due:
            self.labels.pop(update.key, None)
        for key, label in list(self.labels.items()):
            if key not in self.ready and label.ts <= self.watermarks.get(_origin(label), 0):
                del self.labels[key]


def _prefixed(marks: dict[str, int], prefix: str) -> dict[str, int]:
    return {k.removeprefix(prefix): v for k, v in marks.items() if k.startswith(prefix)}


def _prefixed_marks(prefix: str, values: dict[str, int]) -> dict[str, int]:
    return {prefix + k: v for k, v in values.items()}


def _origin(label: saturn_pb2.TreeLabel) -> str:
    return label.src.split("/", 1)[0]
