"""Saturn (paper §3-§5): labels travel a tree of serializers; remote updates become visible in the
order the tree delivers them; attaches wait for the client's label to be stable here (Alg. 1)."""

from __future__ import annotations

import os
import time

from causal_client.label import Label, LabelType
from services.protocols.base import AppliedCallback, Protocol
from services.region.store import RegionStore, RemoteUpdate
from services.saturn.proxy import RemoteProxy

WAIT_SLICE_S = 1.0  # a blocked read of the watermark events lasts at most this (then re-checks)
#: "0" turns off §4.4 (delivering concurrent labels past one still waiting for its payload),
#: to measure what it buys; see loadtest/bench.
CONCURRENT_APPLY_ENV = "SATURN_CONCURRENT_APPLY"


class Saturn(Protocol):
    name = "saturn"
    emits_labels = True

    def __init__(self, store: RegionStore):
        super().__init__(store)
        self.proxy: RemoteProxy | None = None  # only in the process that receives (bulk receiver)
        self.remote_regions = [r for r in store.topology.region_names if r != store.region]

    def stable_for(self, label: Label, watermarks: dict[str, int]) -> bool:
        """Whether everything a client holding ``label`` may have seen is visible here.

        A label is only the greatest the client has seen, not where its past is: one made here
        says nothing of what the client saw elsewhere (written at c, read at b, then a label made
        here by a read of a newer local write). So only a migration label made for this region
        says more: its source made it after everything the client had seen there, and the tree
        delivers it here after all of that (§4.3); made here, the client was here. Any other
        label waits until every origin has passed it (Alg. 1), wherever it was made."""
        if label.type == LabelType.MIGRATION and label.target == self.store.region:
            if label.region == self.store.region:
                return True
            return watermarks.get(label.region, 0) >= label.ts
        return all(watermarks.get(region, 0) >= label.ts for region in self.remote_regions)

    async def wait_attach(self, label: Label, timeout: float | None = None) -> None:
        if label.is_zero:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        shard = self.store.shards[0]
        while True:
            marks, last_event = await shard.watermarks_since()
            if self.stable_for(label, marks):
                return
            left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"label {label} not stable at {self.store.region} within {timeout:.1f}s")
            await shard.wait_watermark_event(last_event, left)  # the proxy raised them, or time

    # -- receiving side (remote proxy) -------------------------------------------------------
    def start_proxy(self, on_applied, on_mode=None) -> RemoteProxy:
        concurrent = os.environ.get(CONCURRENT_APPLY_ENV, "1") != "0"
        self.proxy = RemoteProxy(self.store, on_applied, on_mode, concurrent=concurrent)
        return self.proxy

    async def accept_payloads(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate], on_applied: AppliedCallback
    ) -> None:
        assert self.proxy is not None, "payloads reach only the process that runs the proxy"
        self.proxy.on_payloads(origin_gear, through_ts, updates)  # applied when their labels come

    @property
    def wants_heartbeats(self) -> bool:
        """In timestamp order (§6.1, and at start) the proxy's stable time comes from them."""
        return self.proxy is not None and self.proxy.mode == "timestamp"

    async def resume_position(self, origin_gear: str) -> int:
        assert self.proxy is not None, "bulk transfer reaches only the process that runs the proxy"
        return self.proxy.durable_position(origin_gear.split("/", 1)[0])

    def durable_position(self, origin_gear: str, through_ts: int) -> int:
        assert self.proxy is not None, "bulk transfer reaches only the process that runs the proxy"
        return self.proxy.durable_position(origin_gear.split("/", 1)[0])
