"""The remote proxy's trees by epoch (paper §6.2, online reconfiguration): a mixin of
``RemoteProxy`` (proxy.py), kept apart because it is a protocol of its own.

Online reconfiguration (§6.2). Every tree link names its tree's epoch. Labels of a newer tree
are buffered while the current one still delivers; each region's sink sends an epoch-change
label through the old tree behind everything it sent there, then uses the new tree only. The
proxy takes the new tree once it has delivered every origin's epoch-change label and every label
the old tree brought, and its own region's sink is on the new tree too (else a label made here,
after a client saw an update that came by the new tree, could still go through the old tree and
overtake that update's label elsewhere). Labels of a retired tree are dropped, and its links'
closing is no gap. If either tree loses labels meanwhile, or the proxy is in timestamp order
anyway, it takes the new tree at once in timestamp order: the way back to the tree (proxy.py) then
starts from the new tree's labels (the paper's slower switch).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from services import metrics
from services.labelpath.links import not_a_neighbour
from services.proto import saturn_pb2
from services.saturn import epochs

if TYPE_CHECKING:
    from services.region.stable_order import Wakeup
    from services.region.store import RegionStore
    from services.topology import Topology

log = logging.getLogger("remote-proxy")

SINK_POLL_S = 0.05  # during a reconfiguration: how often the own sink's epoch is read


class TreeEpochs:
    """Which tree's labels are delivered, and the move to the next one.

    The trees by epoch are its own (``init_epochs``). What it reads besides is ``RemoteProxy``'s
    (proxy.py): the attributes its ``__init__`` sets (``store``, ``region`` and ``wakeup`` in its
    base's, ``StableOrder.__init__``) and its methods ``take_labels`` and ``switch``; declared
    here for the type checker (annotations only: nothing of them exists at run time here)."""

    # -- StableOrder's (services/region/stable_order.py)
    store: RegionStore
    region: str
    wakeup: Wakeup
    # -- RemoteProxy's: the delivery of labels (proxy.py)
    labels: deque[saturn_pb2.TreeLabel]  # the current tree's labels, not delivered yet
    mode: str  # "tree" or "timestamp"
    on_change: Callable[[], None] | None
    last_heard: dict[str, float]
    first_since_switch: dict[str, int]
    origin_set: frozenset[str]
    take_labels: Callable[[saturn_pb2.LabelBatch], None]
    switch: Callable[[str], None]

    def init_epochs(self, topology: Topology) -> None:
        """The trees by epoch, this class's own state: the one the process started with."""
        self.epoch = topology.epoch  # the tree whose labels are delivered
        self.trees: dict[int, Topology] = {topology.epoch: topology}
        self.next_epoch: int | None = None  # a newer tree whose labels are buffered
        self.next_labels: deque[saturn_pb2.TreeLabel] = deque()
        self.buffering_since = 0.0  # when the first of them came
        self.epoch_changes: set[tuple[str, int]] = set()  # (origin, epoch) changes delivered
        self.sink_epoch = topology.epoch  # the tree this region's own sink sends on
        self.sink_checked = 0.0

    async def accepts(self, sender: str, epoch: int) -> str | None:
        """Whether ``sender`` may open a tree link here: this region's parent in the tree of
        ``epoch`` (a newer one is looked up in the tree record). A retired tree's links are
        taken, and what they bring dropped."""
        if epoch < self.epoch:
            return None
        if epoch not in self.trees:
            record = await self.store.shards[0].tree_record()
            tree = epochs.tree_from_record(record, self.store.topology.source)
            if tree is not None:
                self.trees[tree.epoch] = tree
        tree = self.trees.get(epoch)
        if tree is None:
            return f"{self.region} knows no tree of epoch {epoch} (its tree record names epoch {self.epoch})"
        return not_a_neighbour(sender, self.region, tree.tree_neighbours.get(self.region, ()))

    def buffer_next_tree(self, epoch: int, batch: saturn_pb2.LabelBatch) -> None:
        if self.next_epoch is None:
            self.buffering_since = time.monotonic()
        self.next_epoch = epoch
        now = time.monotonic()
        for i, label in enumerate(batch.labels):
            if label.type == saturn_pb2.TREE_GAP:
                self.lost_in_next_tree(epoch, f"a link into {label.src} (epoch {epoch}) broke")
                self.take_labels(saturn_pb2.LabelBatch(labels=batch.labels[i + 1 :]))
                return
            self.last_heard[label.src.split("/", 1)[0]] = now  # the origin is alive
            self.next_labels.append(label)
        self.wakeup.set()

    def lost_in_next_tree(self, epoch: int, why: str) -> None:
        """The newer tree lost labels before it took over: it is taken now, in timestamp order.
        That is the tree whose labels are buffered, or where none are yet (a link of the tree
        of ``epoch`` broke before it brought any), that one."""
        newer = self.next_epoch if self.next_epoch is not None else epoch
        log.warning("proxy %s: %s before the tree of epoch %s took over", self.region, why, newer)
        if self.mode == "tree":
            self.switch("timestamp")
        self.take_tree(newer, after_loss=True)

    def take_tree(self, epoch: int, after_loss: bool) -> None:
        """From now on the tree of ``epoch`` is the tree: its buffered labels are queued (not
        after a loss: timestamp order covers them, and the way back to the tree starts after
        the loss), the retired tree's labels are dropped."""
        buffered = self.next_labels if epoch == self.next_epoch and not after_loss else deque()
        held_ms = (time.monotonic() - self.buffering_since) * 1000 if self.next_epoch is not None else 0.0
        log.warning("proxy %s: the tree of epoch %d takes over from epoch %d (%s order, %d labels "
                    "buffered for %.0f ms)", self.region, epoch, self.epoch, self.mode, len(buffered),
                    held_ms)  # fmt: skip
        if self.mode == "tree" and self.labels:
            raise AssertionError("the old tree's labels must all be delivered first")
        self.labels = deque()
        self.epoch, self.next_epoch, self.next_labels = epoch, None, deque()
        self.first_since_switch = {}
        metrics.PROXY_EPOCH.labels(self.region).set(epoch)
        if buffered:
            self.take_labels(saturn_pb2.LabelBatch(labels=list(buffered)))
        if self.on_change:
            self.on_change()
        self.wakeup.set()

    def old_tree_done(self) -> bool:
        """§6.2: every origin's epoch change to the buffered tree delivered, and every label the
        old tree brought."""
        if self.next_epoch is None or self.labels:
            return False
        changed = {origin for origin, epoch in self.epoch_changes if epoch == self.next_epoch}
        return changed >= self.origin_set

    async def own_sink_on(self, epoch: int) -> bool:
        """Whether this region's sink sends on the tree of ``epoch`` (its tree record says)."""
        if self.sink_epoch < epoch and time.monotonic() - self.sink_checked >= SINK_POLL_S:
            self.sink_checked = time.monotonic()
            record = await self.store.shards[0].tree_record()
            self.sink_epoch = int(record.get(epochs.SINK, self.sink_epoch))
        return self.sink_epoch >= epoch
