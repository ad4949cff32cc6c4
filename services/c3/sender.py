"""C3's causality layer, sending side: this region's labels go straight to the regions that
replicate their groups, each with a dependency vector (docs/PROTOCOLS.md, "C3").

It reads the label streams exactly as Saturn's label sink does (the same pump: one shard as it
grows, several merged in timestamp order, heartbeats, cursors saved and streams trimmed every
second), and differs in where labels go:

- an update label to every other region that replicates one of its groups, a migration label to
  its target only, a heartbeat (every ``sink_heartbeat_s``) to every other region;
- over one resumable link per destination (``OutgoingLink(direct=True)``): one link-transport
  connection, so FIFO, paying the emulated WAN between the two sites and no tree. The receiver
  serves that latency on arrival and this end writes at once, so labels on their way outlive
  this region if it dies (the others would otherwise wait for them until it came back);
- each label carries ``deps``: this region's executing-operations clock (RoE) when the label is
  read, which is after its write was applied here, so it covers every remote update its client
  can have seen here (``C3Applier.dependencies``), capped just below the label's own ts: its
  causal past is all below it (a write's ts is above everything its client saw), and read later
  than its write the clock may name updates applied after it; uncapped, two regions' labels could
  each name the other's (each applied the other's update before reading its own label) and wait
  for each other forever at a third region. Capped, every wait is for a smaller ts: no cycle;
- an attach entry (attach.lua: a client let in here with a past up to some ts) is not sent:
  it raises the RoE to that ts for every region, so later labels depend on that past too.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from services import metrics
from services.labelpath.links import OutgoingLink
from services.labelpath.pump import LabelPump
from services.proto import saturn_pb2
from services.topology import Topology

log = logging.getLogger("c3-sender")

Dependencies = Callable[[], dict[str, int]]


class DirectLabelSender(LabelPump):
    """The label sink's pump, sending on one direct link per other region instead of the tree."""

    def __init__(
        self, topology: Topology, region: str, dependencies: Dependencies,
        on_attach: Callable[[int], None], persist: Callable[[], Awaitable[None]],
    ):  # fmt: skip
        """``dependencies``: the RoE now; ``on_attach``: an attach let a past up to a ts in;
        ``persist``: makes the RoE durable (before a cursor past an attach entry is saved)."""
        self.links = {
            r: OutgoingLink(topology, region, r, resumable=True, direct=True)
            for r in topology.region_names
            if r != region
        }
        super().__init__(topology, region)
        self.dependencies = dependencies
        self.on_attach = on_attach
        self.persist = persist
        self.replicas = {g: set(members) - {region} for g, members in topology.group_members.items()}

    def destinations(self, label: saturn_pb2.TreeLabel) -> set[str]:
        if label.type == saturn_pb2.TREE_MIGRATION:
            return {label.target} & self.links.keys()
        return {r for group in label.group.split() for r in self.replicas.get(group, ())}

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        if labels:
            self.sent_through = max(self.sent_through, max(label.ts for label in labels))
        for label in labels:
            if label.type == saturn_pb2.TREE_ATTACH:
                self.on_attach(int(label.target))
        labels = [label for label in labels if label.type != saturn_pb2.TREE_ATTACH]
        self.sent_stage.labels(labels)
        deps = self.dependencies()  # read after the labels: it covers what their writers saw
        outgoing: dict[str, list[saturn_pb2.TreeLabel]] = {}
        kinds: Counter[str] = Counter()
        for label in labels:
            label.deps.update({r: min(ts, label.ts - 1) for r, ts in deps.items()})
            regions = self.destinations(label)
            for region in regions:
                outgoing.setdefault(region, []).append(label)
            if regions:  # labels no other region wants stay home, as the sink's do
                kinds["update" if label.type == saturn_pb2.TREE_UPDATE else "migration"] += 1
        for region, batch in outgoing.items():
            self.links[region].send(batch)
            self.messages_sent.inc()
        for kind, count in kinds.items():  # as the sink counts them (one metric update per kind)
            metrics.LABELS_SENT.labels(self.region, kind).inc(count)

    def send_heartbeat(self, ts: int, regions: tuple[str, ...]) -> None:
        """Every other region hears that nothing more up to ``ts`` comes from here: a label it
        still lacks below that was lost (C3Applier's fallback). Always all of them (C3's labels
        do not count as heard: ``regions`` is every region each period)."""
        self.sent_through = max(self.sent_through, ts)
        beat = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_HEARTBEAT, src=f"{self.region}/sink", ts=ts)
        for link in self.links.values():
            link.send([beat])
        self.reached(self.others)

    async def before_save(self) -> None:
        await self.persist()

    async def run(self, stop: asyncio.Event) -> None:
        cursors = await self.cursors()
        log.info("c3 sender %s → %s, resuming after %s", self.region, sorted(self.links), cursors)
        await asyncio.gather(*self.pumping(cursors, stop), *(link.run(stop) for link in self.links.values()))
