"""The remote proxy (paper §4, §4.4): applies remote updates in the order Saturn delivers their
labels, each once both its label (from the tree) and its payload (from bulk transfer) are here.

Runs inside the region's bulk-receiver process, so payloads reach it in memory; both payloads and
progress are kept in Redis so that a restart resumes. Runs of ready labels are applied in one
Redis call per shard. Per origin region it keeps a watermark, the greatest label ts delivered in
order (heartbeats included): attaches wait on those (Alg. 1).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from services import metrics
from services.proto import saturn_pb2
from services.region.store import RegionStore, RemoteUpdate

log = logging.getLogger("remote-proxy")

MAX_RUN = 512  # labels applied per Redis call at most

Applied = Callable[[str, list[RemoteUpdate]], None]


class RemoteProxy:
    def __init__(self, store: RegionStore, on_applied: Applied):
        self.store = store
        self.region = store.region
        self.local_groups = store.topology.groups_at(store.region)
        self.on_applied = on_applied
        self.labels: deque[saturn_pb2.TreeLabel] = deque()
        self.ready: dict[str, RemoteUpdate] = {}  # pending field → payload waiting for its label
        self.watermarks: dict[str, int] = {}
        self.wakeup = asyncio.Event()
        self.delivered = 0

    async def load(self) -> None:
        """After a restart: payloads stashed before it, and how far delivery had got."""
        for shard in self.store.shards:
            for field, body in (await shard.pending()).items():
                self.ready[field] = RemoteUpdate.unpack(body)
        self.watermarks = await self.store.shards[0].watermarks()
        log.info(
            "proxy %s: %d payloads pending, watermarks %s", self.region, len(self.ready), self.watermarks
        )

    # -- inputs ------------------------------------------------------------------------------
    def on_labels(self, sender: str, batch: saturn_pb2.LabelBatch) -> None:
        self.labels.extend(batch.labels)
        for label in batch.labels:
            kind = saturn_pb2.TreeLabelType.Name(label.type).removeprefix("TREE_").lower()
            metrics.LABELS_RECEIVED.labels(self.region, label.src.split("/", 1)[0], kind).inc()
        self.wakeup.set()

    def on_payloads(self, updates: list[RemoteUpdate]) -> None:
        for update in updates:
            self.ready[update.pending_field] = update
        self.wakeup.set()

    # -- delivery ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.wakeup.wait()
            self.wakeup.clear()
            while await self.deliver_run():
                pass

    def next_run(self) -> tuple[list[RemoteUpdate], dict[str, int], int]:
        """The longest prefix of the label queue that can be delivered now (at most MAX_RUN)."""
        updates: list[RemoteUpdate] = []
        marks: dict[str, int] = {}
        taken = 0
        for label in self.labels:
            if taken == MAX_RUN:
                break
            origin = label.src.split("/", 1)[0]
            seen = max(self.watermarks.get(origin, 0), marks.get(origin, 0))
            if label.ts > seen and label.type == saturn_pb2.TREE_UPDATE:
                if label.group not in self.local_groups:
                    log.error("label of group %s, not replicated here: %s", label.group, label)
                else:
                    update = self.ready.get(f"{label.src}|{label.ts}")
                    if update is None:
                        break  # its payload is still on its way: everything behind it waits
                    updates.append(update)
            if label.ts > seen:
                marks[origin] = label.ts
            taken += 1  # a label at or below the watermark is a re-sent duplicate: dropped
        return updates, marks, taken

    async def deliver_run(self) -> bool:
        updates, marks, taken = self.next_run()
        if not taken:
            return False
        applied = await self.apply_in_order(updates, marks)
        for _ in range(taken):
            self.labels.popleft()
        for update in updates:
            self.ready.pop(update.pending_field, None)
        self.watermarks.update(marks)
        self.delivered += len(applied)
        by_origin: dict[str, list[RemoteUpdate]] = {}
        for update in applied:
            by_origin.setdefault(update.origin_region, []).append(update)
        for origin, group in by_origin.items():
            self.on_applied(origin, group)
        return True

    async def apply_in_order(self, updates: list[RemoteUpdate], marks: dict[str, int]) -> list[RemoteUpdate]:
        """Consecutive updates of the same shard go in one call; shards one after the other, so
        nothing becomes visible before what precedes it. Watermarks move with the last call."""
        topology, region = self.store.topology, self.region
        segments: list[tuple[int, list[RemoteUpdate]]] = []
        for update in updates:
            shard = topology.shard_of(region, update.group, update.row)
            if segments and segments[-1][0] == shard:
                segments[-1][1].append(update)
            else:
                segments.append((shard, [update]))
        if not segments or segments[-1][0] != 0:
            segments.append((0, []))  # the watermarks live in shard 0
        applied: set[str] = set()
        for i, (shard, part) in enumerate(segments):
            last = i == len(segments) - 1
            applied |= await self.store.shards[shard].deliver(part, marks if last else {})
        return [u for u in updates if u.pending_field in applied]
