"""C3 (Fouto, Leitão, Preguiça, "Practical and fast causal consistent partial geo-replication",
NCA'18): no tree. Each region's causality layer sends its labels straight to the regions that
replicate their groups, each label carrying a dependency vector (the region's executing-operations
clock, RoE); a region applies a remote update once the updates its vector names are applied
(its completed-operations clock, RoC, covers it), so updates of different origins are applied in
parallel; a migration is a metadata-only label to its target. Both sides run in the bulk
receiver's process (services/c3/): the sender needs the RoE the applier keeps. The decisions
the paper leaves open are in docs/PROTOCOLS.md, "C3"."""

from __future__ import annotations

import os

from services.c3.applier import C3Applier
from services.c3.sender import DirectLabelSender
from services.labelpath.links import TREE, TreeEndpoint
from services.probes import READY_HEALTH
from services.protocols.base import HoldsPayloads, ReceivingSide, Task
from services.protocols.saturn import CONCURRENT_APPLY_ENV
from services.topology import Topology


class C3(HoldsPayloads):
    name = "c3"
    order: C3Applier | None  # the receiver's applier (start_receiving)

    async def start_receiving(self, side: ReceivingSide) -> list[Task]:
        concurrent = os.environ.get(CONCURRENT_APPLY_ENV, "1") != "0"
        applier = C3Applier(self.store, side.on_applied, concurrent=concurrent)
        await applier.load()
        applier.on_change = side.heartbeats_changed
        self.order = applier
        topology, region = self.store.topology, self.store.region
        sender = DirectLabelSender(
            topology, region, applier.dependencies, applier.note_attach, applier.persist
        )
        endpoint = TreeEndpoint(
            region, applier.accepts, applier.on_labels, on_lost=applier.on_link_lost,
            arrival_delay=lambda sender: topology.wan_link(sender, region, tree=False),
        )  # fmt: skip
        side.server.add(TREE, endpoint.serve)
        side.health.set(READY_HEALTH, True)
        return [applier.run(side.stop), sender.run(side.stop)]

    @classmethod
    def bulk_heartbeat_s(cls, topology: Topology) -> float:
        """RoC for an origin is bounded by bulk transfer's stable time for it (a lost label can
        never let RoC pass an update): idle gears heartbeat as GentleRain's and Cure's do, but
        only while something waits here (``C3Applier.need_heartbeats``)."""
        return topology.stabilization.heartbeat_s

    @property
    def wants_heartbeats(self) -> bool:
        return self.order is not None and self.order.wants_heartbeats
