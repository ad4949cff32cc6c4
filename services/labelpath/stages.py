"""Where a remote update's visibility goes: a sampled update's age at each stage of its path.

``causal_visibility_seconds`` says how late an update became visible; this says where the time
went. Every process on an update's path observes, for one update in four, its age (now minus
its label's ts, the origin's clock when the write gear made it) as it passes:

=============  ==========================================================================
``read``       the origin's label pump read the label from its shard's stream (node: the origin)
``sent``       the pump sent it on (after the merge of the region's shards); ``sent:<r>``
               the same, counted once per region ``r`` it goes to (Saturn's sink)
``in``         a serializer took it (node: the serializer)
``out:<n>``    a node's link wrote it towards ``n``, after the link's latency and the edge's
               delay (node: the sink's region or the serializer)
``label``      the destination's remote proxy took it (node: the destination)
``payload``    its payload reached the destination's bulk receiver
``visible``    it became visible there
=============  ==========================================================================

The update is chosen by its ts (``sampled``), so every stage sees the same updates and the
means of two stages subtract. Ages read the clock of whoever observes them: one clock on one
machine; across hosts, NTP's error adds in. ``loadtest/harness/budget.py`` sums the stages of a
pair of regions into a budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from prometheus_client import Histogram

from services.metrics import VISIBILITY_BUCKETS
from services.proto import saturn_pb2

STAGE_AGE = Histogram(
    "causal_label_stage_seconds",
    "A sampled remote update's age (now minus its label's ts) as it passes a stage of its path",
    ["node", "origin", "stage"],
    buckets=VISIBILITY_BUCKETS,
)
SAMPLE_SHIFT, SAMPLE_MASK = 4, 3  # one in four, by bits of the ts above a shard's residue
UPDATE = saturn_pb2.TREE_UPDATE


def sampled(ts: int) -> bool:
    return (ts >> SAMPLE_SHIFT) & SAMPLE_MASK == 0


class Stage:
    """One stage at one node: observes the ages of the sampled updates that pass it."""

    def __init__(self, node: str, stage: str) -> None:
        self.node = node
        self.stage = stage
        self._by_src: dict[str, Histogram] = {}  # a label's src → its origin's histogram child

    def _child(self, src: str) -> Histogram:
        child = self._by_src.get(src)
        if child is None:
            child = STAGE_AGE.labels(self.node, src.split("/", 1)[0], self.stage)
            self._by_src[src] = child
        return child

    def at(self, src: str, ts: int, now: float | None = None) -> None:
        """One update (its label's src and ts), if it is sampled."""
        if sampled(ts):
            self._child(src).observe(max(0.0, (now or time.time()) - ts / 1e6))

    def each(self, updates: Iterable[tuple[str, int]]) -> None:
        """Every sampled one of ``updates`` ((src, ts) each), with one clock reading for all."""
        now = 0.0
        for src, ts in updates:
            if (ts >> SAMPLE_SHIFT) & SAMPLE_MASK == 0:
                now = now or time.time()
                self._child(src).observe(max(0.0, now - ts / 1e6))

    def labels(self, labels: Iterable[saturn_pb2.TreeLabel]) -> None:
        """The sampled update labels among ``labels``."""
        self.each((label.src, label.ts) for label in labels if label.type == UPDATE)

    def updates(self, updates: Iterable) -> None:
        """The sampled ones of remote updates (``RemoteUpdate``: ts and src)."""
        self.each((update.src, update.ts) for update in updates)
