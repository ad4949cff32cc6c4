"""Cure (Akkoçlar et al., ICDCS'16), as the Saturn paper's §7.1 ran it: dependencies as a vector
with one entry per region, stabilized like GentleRain's scalar but entry by entry.

- A client keeps a vector (``causal_client/label.py``): per region, the greatest ts of that
  region's updates in its causal past. A write carries the writer's vector to its replicas in the
  payload (``write.lua``); every row keeps the entry-by-entry maximum of the vectors of the
  updates applied to it (``common.lua``'s ``merge_deps``), which a read returns and the reader
  merges, so a vector covers the whole past of what its client read, transitively, also of
  updates not replicated where it read them (partial replication).
- Every gear that ships to a region heartbeats while idle (as GentleRain's).
- The receiver's :class:`VectorStabilizer` keeps the global stable vector (GSV: per origin, the
  least ``through_ts`` over that origin's gears that ship here) and, at most every period, applies
  in ``(ts, src)`` order each held update u from origin o whose ts is within GSV[o] (every update
  of o up to it has arrived) and whose vector is covered by what is applied here: for every other
  origin j, every update of j up to u's entry for j is applied (or none can come here). One
  origin's updates are applied in ts order, so each origin's watermark is the ts up to which all
  of its updates are applied: bulk transfer's durable position, and what attaches wait on.
- An attach waits until, for every region that ships here, the watermark has reached the
  client's entry for it (``attach.lua``); a migration sends nothing; reads are local.

Why this is causal: if w depends on u, the writer of w had observed u or something that
depended on it, so its vector's entry for u's origin is at least u's ts, and w is applied here
only once every update of that origin up to it is; u's own dependencies were applied before u,
by the same rule. The difference with GentleRain: w waits only for the origins it depends on, not
for the slowest region that ships here. The price: a vector in every payload, row and label.
"""

from __future__ import annotations

from services.protocols.gentlerain import GentleRain, Stabilizer
from services.region.remote_update import RemoteUpdate
from services.region.stable_order import NEVER


class VectorStabilizer(Stabilizer):
    """The receiver's side: payloads held until the GSV covers them and their vector."""

    async def deliver_stable(self) -> int:
        gsv = {o: self.stable_of(o) for o in self.origins}
        stuck: dict[str, int] = {}  # origin → ts of its first update left held this round

        def applied_through(origin: str) -> int:
            """Every update of ``origin`` up to this ts is applied here (or about to be, in order)."""
            return min(gsv[origin], stuck[origin] - 1) if origin in stuck else gsv[origin]

        due: list[RemoteUpdate] = []
        for update in sorted(self.ready.values(), key=lambda u: (u.ts, u.src)):
            origin = update.origin_region
            if origin in stuck or update.ts > gsv[origin] or not self.covered(update, applied_through):
                stuck.setdefault(origin, update.ts)
                continue
            due.append(update)
        marks = {}
        for origin in self.origins:
            through = applied_through(origin)
            if through < NEVER and through > self.watermarks.get(origin, 0):
                marks[origin] = through
        await self.apply_batches(due, marks)
        return min((applied_through(o) for o in self.origins), default=NEVER)

    def covered(self, update: RemoteUpdate, applied_through) -> bool:
        """Every update of every other origin that ``update``'s vector names is applied here."""
        for region, ts in update.deps or ():
            if region in (self.region, update.origin_region) or region not in self.gears_of:
                continue  # local (visible), the same origin (in order), or nothing of it comes here
            if applied_through(region) < ts:
                return False
        return True


class Cure(GentleRain):
    name = "cure"
    stabilizer_class = VectorStabilizer
