"""§4.4 of the paper: the remote proxy delivers a label that arrived behind one still waiting for
its payload, when the two are concurrent (its ts is lower), and never one that may depend on it.

Driven against the real RemoteProxy and a real Redis (the store's own Lua delivery script): the
labels and payloads are handed in as the tree and bulk transfer would, in a chosen order.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import Iterator

import pytest
from helpers.deadlines import scaled, wait_for
from helpers.topologies import load_topology

from services.launcher.redis_binary import find_redis_server
from services.proto import saturn_pb2
from services.region import gears
from services.region.remote_update import RemoteUpdate, RowChange
from services.region.store import RegionStore
from services.saturn.proxy import RemoteProxy

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

REGION = "frankfurt"


@pytest.fixture(scope="module")
def topology():
    return load_topology("demo-3region.toml", protocol="saturn")


@pytest.fixture
def redis_url(topology) -> Iterator[str]:
    """A real Redis at frankfurt's shard-0 port, emptied for each test."""
    port = topology.redis_port(REGION, 0)
    server = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )

    def listens() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listens, 10, "redis-server listening", interval=0.02)
        yield topology.redis_url(REGION, 0)
    finally:
        server.terminate()
        server.wait(scaled(10))


def update(origin: str, ts: int, row: str) -> RemoteUpdate:
    change = gears.ColumnChange("s", "v", f"{origin}@{ts}")
    return RemoteUpdate(ts, f"{origin}/0", ts, (RowChange("all", row, (change,)),))


def label(origin: str, ts: int, kind: int = saturn_pb2.TREE_UPDATE) -> saturn_pb2.TreeLabel:
    if kind == saturn_pb2.TREE_HEARTBEAT:
        return saturn_pb2.TreeLabel(type=kind, src=f"{origin}/sink", ts=ts)
    return saturn_pb2.TreeLabel(type=kind, src=f"{origin}/0", ts=ts, target="all/r", group="all")


class Harness:
    """A proxy in tree mode whose queue and payloads the test fills; records what it applies."""

    def __init__(self, topology, concurrent: bool):
        self.store = RegionStore(topology, REGION)
        self.applied: list[tuple[str, int]] = []
        self.proxy = RemoteProxy(self.store, self.on_applied, concurrent=concurrent)
        self.proxy.mode = "tree"

    def on_applied(self, origin: str, updates: list[RemoteUpdate]) -> None:
        self.applied += [(origin, u.ts) for u in updates]

    async def payload(self, u: RemoteUpdate) -> None:
        """As bulk transfer hands it over."""
        self.proxy.on_payloads(f"{u.origin_region}/0", u.ts, [u])

    def labels(self, *labels: saturn_pb2.TreeLabel) -> None:
        self.proxy.on_labels("s-eu", saturn_pb2.LabelBatch(labels=list(labels)))

    async def deliver(self) -> None:
        while self.proxy.mode == "tree" and await self.proxy.deliver_run():
            pass


def run(topology, concurrent: bool, scenario) -> Harness:
    async def main() -> Harness:
        harness = Harness(topology, concurrent)
        await harness.store.shards[0].redis.flushdb()  # each run starts from an empty region
        try:
            await scenario(harness)
        finally:
            await harness.store.close()
        return harness

    return asyncio.run(main())


def test_a_concurrent_label_passes_one_waiting_for_its_payload(topology, redis_url):
    """virginia@100 waits for its payload; ireland@90 behind it is concurrent (lower ts) and goes
    first; ireland@120 may depend on virginia@100 and waits; once the payload is here, the rest
    goes in order. Strict order (no §4.4) makes ireland@90 wait too."""

    async def scenario(h: Harness) -> None:
        await h.payload(update("ireland", 90, "b"))
        await h.payload(update("ireland", 120, "c"))
        h.labels(label("virginia", 100), label("ireland", 90), label("ireland", 120))
        await h.deliver()
        h.early = list(h.applied)
        h.early_marks = dict(h.proxy.watermarks)
        await h.payload(update("virginia", 100, "a"))
        await h.deliver()

    concurrent = run(topology, True, scenario)
    assert concurrent.early == [("ireland", 90)]
    assert concurrent.early_marks == {"ireland": 90}
    assert concurrent.applied == [("ireland", 90), ("virginia", 100), ("ireland", 120)]
    assert concurrent.proxy.reordered == 1
    assert not concurrent.proxy.labels

    strict = run(topology, False, scenario)
    assert strict.early == []
    assert strict.applied == [("virginia", 100), ("ireland", 90), ("ireland", 120)]
    assert strict.proxy.reordered == 0


def test_a_label_above_a_waiting_one_waits_even_from_another_origin(topology, redis_url):
    """ireland@80 waits for its payload; virginia@70 is below it and goes; virginia@90 is above
    it, so it may depend on it (a virginia client read it, then wrote): it waits, payload or not."""

    async def scenario(h: Harness) -> None:
        await h.payload(update("virginia", 70, "c"))
        await h.payload(update("virginia", 90, "d"))
        h.labels(label("ireland", 80), label("virginia", 70), label("virginia", 90))
        await h.deliver()

    h = run(topology, True, scenario)
    assert h.applied == [("virginia", 70)]
    assert h.proxy.watermarks == {"virginia": 70}
    assert [x.ts for x in h.proxy.labels] == [80, 90]


def test_heartbeat_behind_a_waiting_label_moves_only_its_origins_watermark(topology, redis_url):
    async def scenario(h: Harness) -> None:
        h.labels(label("virginia", 100), label("ireland", 95, saturn_pb2.TREE_HEARTBEAT))
        h.labels(label("ireland", 130, saturn_pb2.TREE_HEARTBEAT))
        await h.deliver()
        h.stored = await h.store.shards[0].watermarks()

    h = run(topology, True, scenario)
    assert h.proxy.watermarks == {"ireland": 95}
    assert h.stored == {"ireland": 95}  # attaches in other processes see the same
    assert [x.ts for x in h.proxy.labels] == [100, 130]


def test_delivered_ahead_labels_are_not_delivered_again(topology, redis_url):
    """A re-sent duplicate of a label delivered out of order is dropped, not applied twice."""

    async def scenario(h: Harness) -> None:
        await h.payload(update("ireland", 90, "b"))
        h.labels(label("virginia", 100), label("ireland", 90))
        await h.deliver()
        h.labels(label("ireland", 90))  # re-sent after a sink restart
        await h.payload(update("virginia", 100, "a"))
        await h.deliver()

    h = run(topology, True, scenario)
    assert h.applied == [("ireland", 90), ("virginia", 100)]
    assert not h.proxy.labels


def test_a_resent_payload_at_or_below_the_watermark_is_not_applied_again(topology, redis_url):
    """After a reconnection bulk transfer resends from the watermark: what is at or below it was
    applied; delivering it again (a proxy restarted between its Redis call and its bookkeeping)
    applies nothing either."""

    async def scenario(h: Harness) -> None:
        u = update("ireland", 90, "b")
        await h.payload(u)
        h.labels(label("ireland", 90))
        await h.deliver()
        await h.payload(u)  # resent
        h.after_resend = dict(h.proxy.ready)
        h.again, _ = await h.store.shards[0].deliver([u], {"ireland": 90})

    h = run(topology, True, scenario)
    assert h.applied == [("ireland", 90)]
    assert h.after_resend == {}
    assert h.again == set()


def test_after_a_gap_no_label_is_delivered_past_a_lost_one(topology, redis_url):
    """virginia@100's label is lost when a tree link breaks (the serializer says so with a gap
    label). Its payload is here; virginia@110's label comes after the gap. Delivering @110 would
    raise virginia's watermark past @100, which would then never be applied (and @110 may depend
    on it). The proxy falls back to timestamp order instead and applies both, @100 first, once
    every origin's stable time has passed them."""

    async def scenario(h: Harness) -> None:
        await h.payload(update("virginia", 90, "a"))
        await h.payload(update("virginia", 100, "b"))
        await h.payload(update("virginia", 110, "c"))
        gap = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_GAP, src="s-eu")
        h.labels(label("virginia", 90), gap, label("virginia", 110))
        await h.deliver()
        h.early, h.mode_after_gap = list(h.applied), h.proxy.mode
        h.proxy.on_payloads("ireland/0", 200, [])  # ireland's gear: nothing up to 200 (a heartbeat)
        await h.proxy.deliver_stable()

    h = run(topology, True, scenario)
    assert ("virginia", 110) not in h.early, "nothing after the gap is delivered in the tree's order"
    assert h.mode_after_gap == "timestamp"
    assert h.applied == [("virginia", 90), ("virginia", 100), ("virginia", 110)]


def test_a_broken_link_into_the_proxy_is_a_gap_too(topology, redis_url):
    async def scenario(h: Harness) -> None:
        h.proxy.on_link_lost("s-eu")

    assert run(topology, True, scenario).proxy.mode == "timestamp"
