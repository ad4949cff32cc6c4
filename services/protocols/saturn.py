"""Saturn (paper §3-§5): labels travel a tree of serializers; remote updates become visible in the
order the tree delivers them; attaches wait for the client's label to be stable here (Alg. 1,
decided by the attach gear from the watermarks the remote proxy raises)."""

from __future__ import annotations

import os

from services.labelpath.links import TREE, TreeEndpoint
from services.probes import READY_HEALTH
from services.protocols.base import HoldsPayloads, ReceivingSide, Task
from services.saturn.proxy import RemoteProxy

#: "0" turns off §4.4 (delivering concurrent labels past one still waiting for its payload),
#: to measure what it buys; see loadtest/bench.
CONCURRENT_APPLY_ENV = "SATURN_CONCURRENT_APPLY"


class Saturn(HoldsPayloads):
    name = "saturn"
    order: RemoteProxy | None  # the receiver's remote proxy (start_proxy)

    @property
    def proxy(self) -> RemoteProxy | None:
        """The remote proxy: only in the process that receives (the bulk receiver)."""
        return self.order

    # -- receiving side (remote proxy) -------------------------------------------------------
    async def start_receiving(self, side: ReceivingSide) -> list[Task]:
        """The remote proxy lives in the receiver: payloads reach it in memory, labels through
        the tree's ``tree`` service on the same link server. Health ``READY_HEALTH`` is SERVING
        while it applies in the tree's order, caught up."""
        side.health.set(READY_HEALTH, False)

        def on_change() -> None:
            side.health.set(READY_HEALTH, proxy.in_tree_order)
            side.heartbeats_changed()

        proxy = self.start_proxy(side.on_applied, on_change)
        await proxy.load()
        leaf = TreeEndpoint(self.store.region, proxy.accepts, proxy.on_labels, on_lost=proxy.on_link_lost)
        side.server.add(TREE, leaf.serve)
        return [proxy.run(side.stop)]

    def start_proxy(self, on_applied, on_change=None) -> RemoteProxy:
        concurrent = os.environ.get(CONCURRENT_APPLY_ENV, "1") != "0"
        proxy = RemoteProxy(self.store, on_applied, on_change, concurrent=concurrent)
        self.order = proxy
        return proxy

    @property
    def wants_heartbeats(self) -> bool:
        """The proxy's stable time comes from them (in timestamp order, §6.1 and at start)."""
        return self.proxy is not None and self.proxy.wants_heartbeats
