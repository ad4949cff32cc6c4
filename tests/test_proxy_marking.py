"""The remote proxy's bookkeeping for labels made outside the tree's order (services/saturn/proxy.py,
module doc), on a real Redis store with the gears: what a stable marked label applies and which
watermarks it raises, when the marking ends, and how a gap or a misrouted label is handled. The
scenario across processes is in tests/test_saturn_faults.py."""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers.topologies import load_topology

from services.proto import saturn_pb2
from services.region import gears
from services.region.remote_update import RemoteUpdate, RowChange
from services.region.store import RegionStore
from services.saturn.proxy import RemoteProxy

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

TOPOLOGY = load_topology("demo-3region.toml", protocol="saturn")  # virginia, ireland, frankfurt


def update(origin: str, ts: int, row: str) -> RemoteUpdate:
    return RemoteUpdate(
        ts, f"{origin}/0", ts, (RowChange("all", row, (gears.ColumnChange("s", "v", b"x"),)),)
    )


def label(origin: str, ts: int, row: str = "", outside: bool = False, kind=saturn_pb2.TREE_UPDATE):
    src = f"{origin}/0" if kind != saturn_pb2.TREE_HEARTBEAT else f"{origin}/sink"
    target = f"all/{row}" if kind == saturn_pb2.TREE_UPDATE else ""
    return saturn_pb2.TreeLabel(type=kind, src=src, ts=ts, target=target, group="all", outside_order=outside)


async def proxy_at(url: str) -> RemoteProxy:
    store = RegionStore(TOPOLOGY, "virginia", urls=[url])
    await store.install()
    proxy = RemoteProxy(store, lambda origin, updates: None)
    await proxy.load()
    proxy.switch("tree")
    proxy.last_heard = dict.fromkeys(proxy.origins, time.monotonic() + 3600)  # the tree is not silent
    return proxy


async def marked(proxy: RemoteProxy) -> bytes | None:
    shard = proxy.store.shards[0]
    return await shard.redis.hget(shard.key(gears.GEAR_KEY), gears.OUTSIDE_ORDER_FIELD)


def test_a_stable_marked_label_waits_for_its_pasts_labels_and_then_marks_nothing_here(redis_url):
    """y (from frankfurt, marked: frankfurt applied something outside the tree's order) may
    depend on x (from ireland, whose payload is here and whose label is on its way). y is
    delivered once it is stable and x's label has come, after x: nothing is applied ahead of a
    label's arrival, so virginia does not mark the labels its clients make (marking here would
    make the next region mark, and regions that all write kept each other marking)."""

    async def scenario() -> None:
        proxy = await proxy_at(redis_url)
        proxy.on_payloads("ireland/0", 100, [update("ireland", 100, "x")])
        proxy.on_payloads("frankfurt/0", 200, [update("frankfurt", 200, "y")])
        proxy.on_labels("s", saturn_pb2.LabelBatch(labels=[label("frankfurt", 200, "y", outside=True)]))
        await proxy.step()
        assert proxy.watermarks.get("frankfurt", 0) == 0, "not stable: ireland has said nothing of 150"
        assert proxy.wants_heartbeats
        proxy.on_payloads("ireland/0", 250, [])  # a bulk heartbeat: stable time 200 now
        await proxy.step()
        assert proxy.delivered == 0, "stable, but x's label has not come: applying x now would be ahead of it"
        proxy.on_labels("s", saturn_pb2.LabelBatch(labels=[label("ireland", 100, "x")]))
        await proxy.step()
        assert proxy.delivered == 2 and not proxy.ready
        assert proxy.watermarks == {"frankfurt": 200, "ireland": 100}
        assert await marked(proxy) != b"1" and proxy.in_tree_order and not proxy.wants_heartbeats
        await proxy.store.close()

    asyncio.run(scenario())


def test_in_timestamp_order_labels_made_here_are_marked_until_the_tree_has_caught_up(redis_url):
    """Applied in timestamp order (the tree may have lost labels), x is visible here before its
    label: the labels made here are marked until the tree has brought x's label too."""

    async def scenario() -> None:
        proxy = await proxy_at(redis_url)
        proxy.switch("timestamp")
        proxy.on_payloads("ireland/0", 100, [update("ireland", 100, "x")])
        proxy.on_payloads("frankfurt/0", 150, [])
        await proxy.step()
        assert proxy.delivered == 1 and proxy.watermarks["ireland"] == 100  # (the stable time)
        assert await marked(proxy) == b"1" and not proxy.in_tree_order

        def beats(ts: int) -> saturn_pb2.LabelBatch:
            beat = saturn_pb2.TREE_HEARTBEAT
            return saturn_pb2.LabelBatch(labels=[label(o, ts, kind=beat) for o in ("ireland", "frankfurt")])

        # Both origins heard on the tree, and the stable time past it: back to the tree's order,
        # with the watermarks (the stable time, 170) still above what the tree brought (160).
        proxy.on_labels("s", beats(160))
        proxy.on_payloads("ireland/0", 170, [])
        proxy.on_payloads("frankfurt/0", 170, [])
        await proxy.step()
        assert proxy.mode == "tree" and await marked(proxy) == b"1"
        proxy.on_labels("s", beats(180))
        await proxy.step()
        assert proxy.mode == "tree" and await marked(proxy) == b"0" and proxy.in_tree_order
        await proxy.store.close()

    asyncio.run(scenario())


def test_a_gap_in_timestamp_order_restarts_the_way_back_to_the_tree(redis_url):
    async def scenario() -> None:
        proxy = await proxy_at(redis_url)
        proxy.switch("timestamp")
        proxy.on_labels(
            "s", saturn_pb2.LabelBatch(labels=[label("ireland", 100, kind=saturn_pb2.TREE_HEARTBEAT)])
        )
        assert proxy.first_since_switch == {"ireland": 100}
        proxy.on_labels(
            "s", saturn_pb2.LabelBatch(labels=[saturn_pb2.TreeLabel(type=saturn_pb2.TREE_GAP, src="s")])
        )
        assert proxy.first_since_switch == {}, "a label lost after 100 must not be skipped on the way back"
        assert proxy.mode == "timestamp"
        await proxy.store.close()

    asyncio.run(scenario())


def test_a_label_from_no_region_that_sends_here_is_dropped_not_looped_on(redis_url):
    async def scenario() -> None:
        proxy = await proxy_at(redis_url)
        proxy.on_labels("s", saturn_pb2.LabelBatch(labels=[label("virginia", 100, "x", outside=True)]))
        await asyncio.wait_for(proxy.step(), 5)
        assert not proxy.labels
        await proxy.store.close()

    asyncio.run(scenario())
