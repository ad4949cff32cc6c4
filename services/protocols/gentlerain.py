"""GentleRain (Du et al., SoCC'14), as the Saturn paper's §7.1 ran it: one scalar timestamp per
update, and a remote update becomes visible once the region's global stable time has passed it.

- Updates carry their label's ts (the gears' physical clock, above everything the writer had
  seen): the same labels as Saturn's, but no label stream, sink or serializer.
- Every origin gear heartbeats its clock to every region that replicates some of its groups:
  a bulk sender sends a destination an empty batch whenever it has sent it nothing for the
  topology's ``[stabilization] heartbeat_s`` (10 ms by default; services/tuning.py), and the
  gear's clock is read for it once per period (``services/bulk/tail.py``), not once per
  destination. Batches with payloads carry ``through_ts`` too, so a destination that receives
  payloads often needs no heartbeat.
- The receiver's :class:`Stabilizer` computes the global stable time (GST), the least
  ``through_ts`` over every gear of every region that ships here (``StableOrder.stable_time``:
  GentleRain's minimum over all partitions of all datacenters, restricted to those that can send
  anything here), at most every ``[stabilization] period_s`` (the paper's 5 ms), and applies
  the payloads held at or below it in ``(ts, src)`` order; every origin's watermark rises to the GST.
- An attach, a migration included, waits until the client's ts is stable here (``attach.lua``:
  every origin's watermark at or above it); a migration sends nothing (``migrate.lua``). Reads are
  local.

Partial replication: a region waits only for the gears that ship it something. An update it must
show before a remote update y is one of a group it replicates, so it comes from a gear that ships
here, with a ts below y's: the GST over the shipping gears covers it, and gears that ship nothing
here have nothing it could wait for. Every gear that ships here must heartbeat, even if the groups it
writes are rarely written: that traffic is GentleRain's price (the paper's Fig. 5c).
"""

from __future__ import annotations

import asyncio

from services.probes import READY_HEALTH
from services.protocols.base import HoldsPayloads, ReceivingSide, Task
from services.region.stable_order import StableOrder
from services.topology import Topology

IDLE_CHECK_S = 1.0  # with nothing arriving, the loop wakes this often anyway


class Stabilizer(StableOrder):
    """The receiver's side: payloads held until the GST passes them."""

    def __init__(self, store, on_applied):
        super().__init__(store, on_applied)
        self.period_s = store.topology.stabilization.period_s

    async def run(self, stop: asyncio.Event) -> None:
        """The GST can only move when a batch or heartbeat arrives: each arrival is followed by
        one stabilization, and the next one waits ``period_s`` at least."""
        await self.serve(stop, self.deliver_stable, lambda: IDLE_CHECK_S, self.period_s)


class GentleRain(HoldsPayloads):
    name = "gentlerain"
    stabilizer_class: type[Stabilizer] = Stabilizer

    async def start_receiving(self, side: ReceivingSide) -> list[Task]:
        stabilizer = self.stabilizer_class(self.store, side.on_applied)
        await stabilizer.load()
        self.order = stabilizer
        side.health.set(READY_HEALTH, True)
        return [stabilizer.run(side.stop)]

    @classmethod
    def bulk_heartbeat_s(cls, topology: Topology) -> float:
        return topology.stabilization.heartbeat_s

    @property
    def wants_heartbeats(self) -> bool:
        """Always: the GST is made of them."""
        return True
