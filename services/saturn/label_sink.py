"""The label sink (paper §4): streams a region's labels to its serializer in timestamp order.

The reading, merging, heartbeats and batching are the label pump's (services/labelpath/pump.py),
which C3's sender shares; this module sends what it pumps up the Saturn tree.

Online reconfiguration (paper §6.2): when the region's tree record (epochs.py) names a newer
tree, the sink sends an epoch-change label through the old tree, behind everything it sent there,
and every later label through the new one (a cut between two reads, so each label goes one way).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence

from redis.exceptions import RedisError

from services import metrics, runtime
from services.labelpath.links import OutgoingLink
from services.labelpath.pump import STORE_RETRY_S, LabelPump, any_of
from services.labelpath.sources import LabelSource
from services.labelpath.stages import Stage, sampled
from services.proto import saturn_pb2
from services.saturn import epochs
from services.topology import Topology

log = logging.getLogger("label-sink")

TREE_WAIT_S = 5.0  # the tree record is read when it changes (an event wakes the sink), else this often


class LabelSink(LabelPump):
    """Saturn's label sink: the pump, sending up the tree (and across to a new one, §6.2)."""

    def __init__(self, topology: Topology, region: str, sources: Sequence[LabelSource] = ()):
        super().__init__(topology, region, sources)
        self.link = self.link_on(topology)
        self.link_tasks: list[asyncio.Task] = []
        self.noted_epoch = -1  # the epoch last reported in the tree record
        others = set(self.others)
        self.shipped_groups = {g for g, members in topology.group_members.items() if others & set(members)}
        self.replicas = {g: others & set(members) for g, members in topology.group_members.items()}
        self._reach: dict[tuple[int, str], tuple[str, ...]] = {}  # (type, group or target) → regions
        self.sent_to = {r: Stage(region, f"sent:{r}") for r in self.others}  # per destination

    def reach(self, kind: int, key: str) -> tuple[str, ...]:
        """The regions a label reaches (as the serializers route it): an update's, those that
        replicate one of its groups; a migration's, its target."""
        found = self._reach.get((kind, key))
        if found is None:
            if kind == saturn_pb2.TREE_UPDATE:
                found = tuple(sorted(set().union(*(self.replicas.get(g, ()) for g in key.split()))))
            else:
                found = (key,) if key in self.last_reached else ()
            self._reach[(kind, key)] = found
        return found

    def link_on(self, tree: Topology) -> OutgoingLink:
        (parent,) = tree.tree_neighbours[self.region]  # a region is a leaf of the tree
        return OutgoingLink(tree, self.region, parent)

    def start_link(self, stop: asyncio.Event) -> None:
        self.link_tasks.append(asyncio.create_task(self.link.run(stop)))

    def cut_to(self, tree: Topology, stop: asyncio.Event) -> None:
        """§6.2: the epoch-change label goes through the old tree behind all this sink sent
        there (as a heartbeat: nothing more from here up to its ts on that tree); every later
        label goes through the new tree. Sending is synchronous, so the cut falls between two
        sends wherever the pump is waiting; every label not sent yet is above ``sent_through``
        (the pump sends all it read up to the heartbeat it sends)."""
        change = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_EPOCH, src=f"{self.region}/sink",
                                      ts=self.sent_through, target=str(tree.epoch))  # fmt: skip
        old, self.link = self.link, self.link_on(tree)
        old.send([change])
        old.retire()
        log.info("label sink %s: epoch %d → %d, now through %s", self.region, old.epoch, tree.epoch,
                 self.link.neighbour)  # fmt: skip
        self.start_link(stop)
        self.last_reached = dict.fromkeys(self.others, 0.0)  # a heartbeat on the new tree at once

    async def watch_tree(self, stop: asyncio.Event) -> None:
        """Reads which tree to send on whenever the tree record changes (it blocks on the
        record's events: an idle sink once polled it 20 times a second, most of its idle CPU): a
        newer tree is cut to at once; the epoch sent on is reported (a proxy waits for its own
        region's sink before it takes the new tree)."""
        seen = b"0-0"
        while not stop.is_set():
            try:
                if self.noted_epoch != self.link.epoch:
                    epoch = self.link.epoch
                    await self.gears[0].note_tree_progress(epochs.SINK, epoch)
                    self.noted_epoch = epoch
                wanted = await self.gears[0].tree_to_send_on()
                if wanted is not None and wanted > self.link.epoch:
                    tree = await epochs.current_tree(self.gears[0], self.topology)
                    if tree.epoch == wanted:
                        self.cut_to(tree, stop)
                        continue  # reported at once
                seen = await runtime.first_or_stop(
                    stop, self.gears[0].wait_tree_event(seen, TREE_WAIT_S), seen
                )
            except (RedisError, OSError) as exc:
                log.warning("tree record unavailable (%s)", exc)
                await runtime.sleep_or_stop(stop, STORE_RETRY_S)

    def wanted(self, label: saturn_pb2.TreeLabel) -> bool:
        if label.type == saturn_pb2.TREE_UPDATE:
            return any_of(label.group, self.shipped_groups)
        return label.target != self.region

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        if labels:
            self.sent_through = max(self.sent_through, max(label.ts for label in labels))
        labels = [label for label in labels if self.wanted(label)]
        if labels:
            self.sent_stage.labels(labels)
            self.observe_sent(labels)
            self.link.send(labels)
            update = saturn_pb2.TREE_UPDATE
            for kind, key in {(x.type, x.group if x.type == update else x.target) for x in labels}:
                self.reached(self.reach(kind, key))
            kinds = Counter("update" if x.type == saturn_pb2.TREE_UPDATE else "migration" for x in labels)
            for name, count in kinds.items():  # one metric update per kind and batch: they cost
                metrics.LABELS_SENT.labels(self.region, name).inc(count)
            self.messages_sent.inc()

    def observe_sent(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        """The sampled update labels' ages as they leave, per region they go to (stages.py): a
        pair's budget compares its own labels, not all of the origin's."""
        now = time.time()
        for label in labels:
            if label.type == saturn_pb2.TREE_UPDATE and sampled(label.ts):
                for region in self.reach(label.type, label.group):
                    self.sent_to[region].at(label.src, label.ts, now)

    def send_heartbeat(self, ts: int, regions: tuple[str, ...]) -> None:
        """The serializers route a heartbeat towards the regions it names (all: none named)."""
        self.sent_through = max(self.sent_through, ts)
        target = "" if len(regions) == len(self.others) else " ".join(regions)
        self.link.send([saturn_pb2.TreeLabel(
            type=saturn_pb2.TREE_HEARTBEAT, src=f"{self.region}/sink", ts=ts, target=target,
        )])  # fmt: skip
        self.reached(regions)

    async def run(self, stop: asyncio.Event) -> None:
        cursors = await self.cursors()
        tree = await epochs.current_tree(self.gears[0], self.topology)
        if tree.epoch != self.link.epoch:  # restarted after a reconfiguration (or during one)
            self.link = self.link_on(tree)
        log.info("label sink %s → %s (epoch %d), resuming after %s",
                 self.region, self.link.neighbour, self.link.epoch, cursors)  # fmt: skip
        self.start_link(stop)
        await asyncio.gather(self.watch_tree(stop), *self.pumping(cursors, stop))
        await asyncio.gather(*self.link_tasks)


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    await LabelSink(topology, region).run(stop)


def main() -> None:
    runtime.service_main("label-sink: streams this region's labels up the Saturn tree", serve, fast_loop=True)


if __name__ == "__main__":
    main()
