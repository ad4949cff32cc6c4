"""The remote proxy (paper §4, §4.4, §6.1): applies remote updates in the order Saturn delivers
their labels, each once both its label (from the tree) and its payload (from bulk transfer) are
here; and in timestamp order while the tree is down.

Runs inside the region's bulk-receiver process, so payloads reach it in memory; progress (the
watermarks) is kept in Redis so that a restart resumes. Holding payloads, the stable time and
applying in order are ``services/region/stable_order.py``, shared with GentleRain. Runs of
ready labels are applied in one Redis call per shard. Per origin region it keeps a watermark,
the greatest label ts delivered in order (heartbeats included): attaches wait on those (Alg. 1).

Two modes:
- ``tree``: Saturn's order. Labels at or below their origin's watermark are re-sent duplicates.
- ``timestamp`` (§6.1): when labels may have been lost (a gap: a link broke), when some origin
  has been silent on the tree for ``tree_silence_s`` while its bulk links here are open (a
  serializer, sink or link is down, the region is not), and at start-up (labels in flight
  before a restart are gone). Updates are applied in (ts, src) order up to the stable time, the
  least ``through_ts`` that bulk transfer has reported for every gear shipping here (senders send
  heartbeats when idle). Labels keep arriving and are queued. The proxy returns to ``tree`` once
  it has heard every origin on the tree since the switch and the stable time has passed the first
  label each origin sent since then: every update before those was applied in timestamp order,
  and every later label is on the tree, which delivers it in causal order (as in §6.2's slow
  reconfiguration).

Outside the tree's order. The tree delivers y after x at every region only if x's label reached
y's region before y's label was made there. A region that applies x in timestamp order (or whose
watermarks rise past labels not yet here) lets its clients see x before x's label has passed it,
and the label of their next write y can then overtake x's label on the way to a third region that
is in the tree's order (tests/test_saturn_faults.py plays it). So while some update applied here
may still be ahead of its label (for some origin, the watermark is above the greatest ts the tree
has brought from it, or the mode is ``timestamp``), the region's gears mark the labels they make
(``outside_order``). A receiver delivers a marked label only once it is stable in timestamp order
and the tree has brought the labels of every payload held here up to it: it first applies every
update up to the label's ts in (ts, src) order (all are here: stable), the label's origin's
watermark rises to its ts, and every other origin's to the greatest ts applied from it. That is
ahead of those labels' delivery but not of their arrival, which is what the tree's guarantee
needs, so the receiver does not mark its own labels (had it applied payloads whose labels had
not come, it would have to, and regions that all write kept each other marking for as long as
they wrote). A gap while in timestamp order restarts the way back to the tree (a label lost then
may lie below the first ones heard since the switch).

A region gone (every process stopped, AntidoteDB's datacenter that never caught up) must not stall
the others. Its sink's link into the tree broke, so a gap comes; but a serializer's gap names the
regions behind the broken link, and a label lost there reached nobody beyond it: nothing delivered
here can depend on it until one of those regions is heard again, so the proxy stays in the tree's
order and switches when the first of their labels comes (behind the gap, FIFO). Its silence then is
not the tree's: timestamp order would wait for its heartbeats too, so an origin with no bulk link
open here is not counted as silent. The other regions' labels flow on in the tree's order.

Online reconfiguration (§6.2): proxy_trees.py.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable

from services import metrics
from services.labelpath.pump import any_of
from services.labelpath.stages import Stage
from services.proto import saturn_pb2
from services.region.remote_update import RemoteUpdate
from services.region.stable_order import MAX_RUN, NEVER, Applied, StableOrder
from services.region.store import RegionStore
from services.saturn import epochs
from services.saturn.proxy_trees import SINK_POLL_S, TreeEpochs

log = logging.getLogger("remote-proxy")

MAX_SCAN = 1024  # how far behind a waiting label the queue is searched for concurrent ones (§4.4)
MAX_SKIPPED = 32  # ... stopping after this many labels in a row that must wait (the queue is
#                   roughly in ts order, so a long run of them means few concurrent ones behind)
CHECK_EVERY_S = 0.5  # with nothing arriving, the tree's silence is checked this often
#: "1": a newer tree's labels are delivered as they come, without waiting for the epoch change,
#: as if the regions were just reconnected to it: only to show that this breaks causality (tests).
NAIVE_RECONFIGURATION_ENV = "SATURN_NAIVE_RECONFIGURATION"


class RemoteProxy(StableOrder, TreeEpochs):
    def __init__(
        self,
        store: RegionStore,
        on_applied: Applied,
        on_change: Callable[[], None] | None = None,
        concurrent: bool = True,
    ):
        super().__init__(store, on_applied)  # payloads held, watermarks, the stable time
        self.concurrent = concurrent  # §4.4: deliver concurrent labels past one still waiting
        self.reordered = 0  # labels delivered ahead of an earlier one that waited for its payload
        self.local_groups = store.topology.groups_at(store.region)
        self.labels: deque[saturn_pb2.TreeLabel] = deque()
        self.label_stage = Stage(store.region, "label")
        topology = store.topology
        self.origin_set = frozenset(self.origins)
        self.last_heard: dict[str, float] = {}  # origin → when the tree last brought anything
        self.first_since_switch: dict[str, int] = {}  # origin → ts of its first label since then
        self.gaps_pending: set[str] = set()  # origins whose labels a gap may have lost, not heard since
        self.tree_heard: dict[str, int] = {}  # origin → greatest label ts the tree brought here
        self.applied_floor: dict[str, int] = {}  # origin → greatest ts applied on any shard at start
        self.outside_order: bool | None = None  # whether the gears mark their labels (None: unknown)
        self.awaiting_stable = False  # a marked label waits for the stable time: heartbeats wanted
        self.mode = "timestamp"  # until the tree has proved it delivers everything (see above)
        self.on_change = on_change  # the mode, the marking or the need of heartbeats changed
        self.init_epochs(topology)  # the trees by epoch: TreeEpochs's own (proxy_trees.py)
        self.reported_epoch: int | None = None
        self.retired_dropped = 0  # labels of a retired tree, dropped
        self.naive = os.environ.get(NAIVE_RECONFIGURATION_ENV) == "1"

    async def load(self) -> None:
        """After a restart: how far delivery had got. Bulk transfer resends what came after."""
        await super().load()
        # A crash between the shards of one run leaves later updates applied on other shards than
        # shard 0's watermarks say: the marking must cover those too (labels_caught_up).
        for shard in self.store.shards[1:]:
            for origin, ts in (await shard.watermarks()).items():
                self.applied_floor[origin] = max(ts, self.applied_floor.get(origin, 0))
        record = await self.store.shards[0].tree_record()
        tree = epochs.tree_from_record(record, self.store.topology.source)
        if tree is not None:
            self.trees[tree.epoch] = tree
            self.epoch = tree.epoch
        self.sink_epoch = int(record.get(epochs.SINK, self.store.topology.epoch))
        metrics.PROXY_EPOCH.labels(self.region).set(self.epoch)
        log.info("proxy %s: watermarks %s, tree of epoch %d", self.region, self.watermarks, self.epoch)

    # -- inputs ------------------------------------------------------------------------------
    def on_link_lost(self, sender: str, epoch: int | None = None) -> None:
        """Our link from the tree broke or re-opened: labels may be lost (links.py)."""
        epoch = self.epoch if epoch is None else epoch
        if epoch < self.epoch or self.naive:
            return  # a retired tree being taken down
        if epoch == self.epoch:
            self.gap(f"the link from {sender} broke")
        else:
            self.lost_in_next_tree(epoch, f"the link from {sender} (epoch {epoch}) broke")

    def gap(self, why: str) -> None:
        """Labels may have been lost: a later label of an origin could otherwise be delivered
        past a lost one, and the lost one's update never applied. Timestamp order is safe."""
        self.gaps_pending.clear()  # timestamp order covers those too
        if self.mode == "tree":
            log.warning("proxy %s: %s: labels may be lost", self.region, why)
            self.switch("timestamp")
            self.wakeup.set()
        else:  # the way back to the tree must start after the loss: a label lost now may lie
            self.first_since_switch = {}  # between the first labels heard so far and the stable time

    def on_labels(
        self, sender: str, batch: saturn_pb2.LabelBatch, epoch: int | None = None, raw: bytes = b""
    ) -> None:
        """Labels from the tree of ``epoch`` (default: the current one)."""
        epoch = self.epoch if epoch is None else epoch
        if self.naive:
            self.epoch = max(self.epoch, epoch)
        elif epoch < self.epoch:
            self.retired_dropped += len(batch.labels)
            return
        elif epoch > self.epoch:
            if self.mode == "tree" and self.next_epoch in (None, epoch):
                self.buffer_next_tree(epoch, batch)
                return
            if self.mode == "tree":  # a third tree before the second took over: the slow way
                self.switch("timestamp")
            self.take_tree(epoch, after_loss=False)
        self.take_labels(batch)

    def take_labels(self, batch: saturn_pb2.LabelBatch) -> None:
        """Labels of the current tree, in its order."""
        self.label_stage.labels(batch.labels)
        now = time.monotonic()
        counts: Counter[tuple[str, int]] = Counter()
        for label in batch.labels:
            if label.type == saturn_pb2.TREE_GAP:  # in order: what came before it stays valid
                self.on_gap_label(label)
                continue
            origin = label.src.split("/", 1)[0]
            if origin in self.gaps_pending:
                self.gap(f"{origin} is heard again after a link into the tree broke")
            self.labels.append(label)
            counts[origin, label.type] += 1
            self.last_heard[origin] = now
            if label.ts > self.tree_heard.get(origin, 0):
                self.tree_heard[origin] = label.ts
            if self.mode == "timestamp":
                self.first_since_switch.setdefault(origin, label.ts)
        for (origin, kind), count in counts.items():  # one metric update per kind and batch
            self.received_counter(origin, kind).inc(count)
        self.wakeup.set()

    def on_gap_label(self, label: saturn_pb2.TreeLabel) -> None:
        """A link into ``label.src`` broke. Where the gap names the regions behind that link,
        and the proxy is in the tree's order, it waits until one of them is heard (module doc)."""
        named = frozenset(label.target.split()) & self.origin_set
        if self.mode != "tree" or not label.target:
            self.gap(f"a link into {label.src} broke")
        elif named - self.gaps_pending:
            regions = ", ".join(sorted(named))
            log.warning("proxy %s: a link into %s broke: labels of %s may be lost; timestamp order once "
                        "one of them is heard again", self.region, label.src, regions)  # fmt: skip
            self.gaps_pending |= named

    def on_payloads(self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]) -> None:
        """Payloads wait in memory for their labels."""
        self.hold(origin_gear, through_ts, updates)
        if self.labels or self.mode == "timestamp":  # in the tree's order, a payload can only
            self.wakeup.set()  # unblock a label already queued (waking for nothing costs CPU)

    @functools.cache  # noqa: B019 (one proxy per process, a handful of children)
    def received_counter(self, origin: str, kind: int):
        name = saturn_pb2.TreeLabelType.Name(kind).removeprefix("TREE_").lower()
        return metrics.LABELS_RECEIVED.labels(self.region, origin, name)

    # -- delivery ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        log.info("proxy %s starts in timestamp order until the tree has caught up", self.region)

        def quiet_s() -> float:  # the tree's silence is checked; a switch under way polled faster
            pending = self.next_epoch is not None or self.sink_epoch < self.epoch
            return SINK_POLL_S if pending else CHECK_EVERY_S

        await self.serve(stop, self.step, quiet_s)

    async def step(self) -> None:
        """What one wake-up does: deliver what can be, in the current mode; switch modes."""
        if self.mode == "tree":
            if self.tree_silent():
                self.switch("timestamp")
            else:  # a gap may switch the mode while a run is being applied: then stop
                while self.mode == "tree" and await self.deliver_run():
                    pass
            newer = self.next_epoch  # not None where old_tree_done()
            if newer is not None and self.old_tree_done() and await self.own_sink_on(newer):
                if self.next_epoch is not None:  # None: a loss took it while the sink was read
                    self.take_tree(self.next_epoch, after_loss=False)
                while self.mode == "tree" and await self.deliver_run():
                    pass
        if self.mode == "timestamp":
            applied_through = await self.deliver_stable()
            if self.tree_caught_up(applied_through) and await self.own_sink_on(self.epoch):
                self.switch("tree")
                self.wakeup.set()
        if self.outside_order is not False and self.labels_caught_up():
            await self.mark_labels(False)
        if self.reported_epoch != self.epoch:
            epoch = self.epoch
            await self.store.shards[0].note_tree_progress(epochs.PROXY, epoch)
            self.reported_epoch = epoch

    # -- modes -------------------------------------------------------------------------------
    def tree_silent(self) -> bool:
        """Some origin silent on the tree (3 heartbeats missed) that is not gone: one that ships
        here with no bulk link open is stopped or cut off, and timestamp order would wait for it
        as well (module doc)."""
        now = time.monotonic()
        silence = self.store.topology.saturn.tree_silence_s
        return any(
            now - self.last_heard.get(o, 0.0) > silence and (o not in self.gears_of or self.bulk_links[o] > 0)
            for o in self.origins
        )

    def tree_caught_up(self, applied_through: int) -> bool:
        """Every origin heard on the tree since the switch, and everything up to the first label
        each sent since then applied in timestamp order (``applied_through``: what the last
        round applied through, not the stable time now, which may have moved on meanwhile:
        payloads between the two would be left behind, their labels gone, and the watermarks
        would pass them in the tree's order; the exactly-once test caught it)."""
        if self.tree_silent() or set(self.first_since_switch) != set(self.origins):
            return False
        return applied_through >= max(self.first_since_switch.values(), default=0)

    def labels_caught_up(self) -> bool:
        """Every update applied here has had its label pass here on the tree (module doc)."""
        if self.mode != "tree":
            return False
        return all(
            self.tree_heard.get(o, 0) >= max(self.watermarks.get(o, 0), self.applied_floor.get(o, 0))
            for o in self.origins
        )

    async def mark_labels(self, outside: bool) -> None:
        """Sets on every shard (all of them before anything is applied outside the tree's order:
        a client may read at one shard and write at another) whether labels made here are marked."""
        if self.outside_order is outside:
            return
        self.outside_order = None  # unknown until every shard has it (a failure leaves it unknown)
        if outside:
            log.info("proxy %s: outside the tree's order; labels made here are marked", self.region)
        else:
            log.info("proxy %s: the tree has caught up; labels made here are no longer marked", self.region)
        await asyncio.gather(*(shard.mark_labels_outside_order(outside) for shard in self.store.shards))
        self.outside_order = outside
        metrics.PROXY_MARKING.labels(self.region).set(int(outside))
        if self.on_change:
            self.on_change()

    @property
    def in_tree_order(self) -> bool:
        """Settled: applying in the tree's order, and the tree has caught up (nothing is marked)."""
        return self.mode == "tree" and self.outside_order is False

    @property
    def wants_heartbeats(self) -> bool:
        """The stable time comes from bulk heartbeats: wanted in timestamp order, and while a
        marked label waits for it."""
        return self.mode == "timestamp" or self.awaiting_stable

    def set_awaiting_stable(self, awaiting: bool) -> None:
        if awaiting != self.awaiting_stable:
            self.awaiting_stable = awaiting
            if self.on_change:
                self.on_change()  # the senders are told whether heartbeats are wanted

    def switch(self, mode: str) -> None:
        log.warning("proxy %s: %s → %s order", self.region, self.mode, mode)
        self.mode = mode
        self.first_since_switch = {}
        metrics.PROXY_MODE.labels(self.region).set(1 if mode == "tree" else 0)
        if self.on_change:
            self.on_change()

    async def deliver_stable_label(self, ts: int, origin: str) -> None:
        """A marked label (module doc) of ``origin`` at ``ts``, stable here: every update up to
        ts in (ts, src) order, then the label. The label's origin's watermark rises to ts; every
        other origin's only to the greatest ts applied from it, whose label is on its way, so the
        marking this starts here ends once those labels have come (not at each origin's next
        heartbeat, which would keep regions that answer each other marking)."""
        due = self.ready_through(ts)
        marks = {origin: ts}
        for update in due:
            marks[update.origin_region] = max(update.ts, marks.get(update.origin_region, 0))
        marks = {o: t for o, t in marks.items() if t > self.watermarks.get(o, 0)}
        await self.apply_batches(due, marks)

    async def apply_batches(self, due: list[RemoteUpdate], marks: dict[str, int]) -> None:
        """Outside the tree's order (timestamp order, a stable marked label): the gears mark
        their labels before anything becomes visible ahead of its label (module doc)."""
        if (due or marks) and self.ahead_of_tree(due, marks):
            await self.mark_labels(True)
        await super().apply_batches(due, marks)

    def ahead_of_tree(self, due: list[RemoteUpdate], marks: dict[str, int]) -> bool:
        """Whether applying ``due`` and raising the watermarks to ``marks`` shows here something
        whose label the tree has not brought here yet. What matters is the label's arrival, not
        its delivery: a label y made here after x's label reached this region follows x's on
        every path of the tree (module doc). In timestamp order the tree is not trusted (a label
        may be lost): always."""
        if self.mode != "tree":
            return True
        heard = self.tree_heard
        return any(u.ts > heard.get(u.origin_region, 0) for u in due) or any(
            ts > heard.get(origin, 0) for origin, ts in marks.items()
        )

    def first_unarrived(self) -> int:
        """The least ts of a payload held here whose label the tree has not brought yet (NEVER
        if none): a stable marked label below it makes nothing visible ahead of its label's
        arrival, and this region need not mark its own labels after it. Waiting for those
        labels (they are on their way; their arrival waits for nothing here) is what keeps
        marking from spreading: delivering a marked label by applying payloads whose labels had
        not come made the receiver mark its labels, which made the next region mark, and
        regions that all write kept each other marking, every update waiting for the stable
        time, for as long as the writes went on. While a newer tree's labels are buffered they
        do not count as brought (this region's sink may still send on the old tree), and a
        marked label waiting for them could hold back the old tree's end: then the label is
        delivered as before, and this region marks."""
        if self.next_epoch is not None:
            return NEVER
        heard = self.tree_heard
        return min((u.ts for u in self.ready.values() if u.ts > heard.get(u.origin_region, 0)), default=NEVER)

    def next_run(self) -> tuple[list[RemoteUpdate], dict[str, int], list[int], saturn_pb2.TreeLabel | None]:
        """What of the label queue can be delivered now (at most MAX_RUN labels): the ready
        prefix, and with ``concurrent`` set also the labels behind a label still waiting for its
        payload whose ts is below every waiting label's (§4.4: the tree delivers causal
        dependencies in order with growing timestamps, so a later label with a smaller ts cannot
        depend on the waiting ones; and one origin's labels stay in order, so per-origin
        watermarks keep meaning "all of this origin up to here"). A marked label (module doc)
        waits for the stable time like a label for its payload; once stable, it ends the run, or
        when first, asks for the updates up to its ts in timestamp order. Returns the updates, the
        new watermarks, the queue positions taken, and that label (or None)."""
        updates: list[RemoteUpdate] = []
        marks: dict[str, int] = {}
        taken: list[int] = []
        waiting_below = 2**63  # the least ts of the labels left waiting
        skipped = 0  # labels in a row left waiting
        awaiting_stable, stable, unarrived = False, None, None
        for position, label in enumerate(self.labels):
            if len(taken) == MAX_RUN or position == MAX_SCAN or skipped == MAX_SKIPPED:
                break
            if label.ts >= waiting_below:
                skipped += 1
                continue  # may depend on a waiting label: it waits too
            origin = label.src.split("/", 1)[0]
            if origin not in self.origin_set:  # misrouted: nothing here could ever deliver it
                log.error(
                    "proxy %s: label from %s, not a region that sends here: %s", self.region, origin, label
                )
                taken.append(position)
                continue
            seen = max(self.watermarks.get(origin, 0), marks.get(origin, 0))
            if label.ts > seen and label.outside_order:
                stable = self.stable_time() if stable is None else stable
                if unarrived is None:
                    unarrived = self.first_unarrived()
                if label.ts <= stable and label.ts < unarrived:
                    if not taken:
                        self.set_awaiting_stable(awaiting_stable)
                        return [], {}, [], label
                    break  # what was taken first, then this one
                awaiting_stable = True
                if not self.concurrent:
                    break
                waiting_below = label.ts
                skipped += 1
                continue
            if label.ts > seen and label.type == saturn_pb2.TREE_UPDATE:
                if not any_of(label.group, self.local_groups):
                    log.error("label of group %s, not replicated here: %s", label.group, label)
                else:
                    update = self.ready.get(f"{label.src}|{label.ts}")
                    if update is None:  # its payload is still on its way
                        if not self.concurrent:
                            break
                        waiting_below = label.ts
                        skipped += 1
                        continue
                    updates.append(update)
            if label.ts > seen:
                marks[origin] = label.ts
            skipped = 0
            taken.append(position)  # a label at or below the watermark is a re-sent duplicate: dropped
        self.set_awaiting_stable(awaiting_stable)
        return updates, marks, taken, None

    async def deliver_run(self) -> bool:
        updates, marks, taken, stable_first = self.next_run()
        if stable_first is not None:  # a marked label, stable now: what it may depend on first
            origin = stable_first.src.split("/", 1)[0]
            await self.deliver_stable_label(stable_first.ts, origin)
            return self.watermarks.get(origin, 0) >= stable_first.ts  # progress (never spin)
        if not taken:
            return False
        queue = self.labels
        for i in taken:
            if queue[i].type == saturn_pb2.TREE_EPOCH:
                self.epoch_changes.add((queue[i].src.split("/", 1)[0], int(queue[i].target or 0)))
        applied = await self.apply_in_order(updates, marks)
        if queue is not self.labels:  # a newer tree took over meanwhile (after a loss): the old
            self.finish(updates, applied, marks)  # queue is gone, timestamp order covers it
            return True
        if taken[-1] == len(taken) - 1:  # a prefix (the usual case)
            for _ in taken:
                self.labels.popleft()
        else:  # some from behind a waiting label: the rest of the scanned part stays, in order
            gone = set(taken)
            kept = [self.labels.popleft() for _ in range(taken[-1] + 1)]
            self.labels.extendleft(reversed([x for i, x in enumerate(kept) if i not in gone]))
            ahead = len(taken) - next(i for i, position in enumerate(taken) if position != i)
            self.reordered += ahead
            metrics.PROXY_REORDERED.labels(self.region).inc(ahead)
        self.finish(updates, applied, marks)
        return True
