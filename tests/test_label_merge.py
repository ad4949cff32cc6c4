"""The label pump's merge of a region's shards (services/labelpath/merge.py) against a real Redis
with the gears: every label goes out once, in (ts, src) order across shards, no heartbeat promises
a time that a later label is below, a label on one shard is not held for a heartbeat period by an
idle other, and an idle region costs the store a handful of calls a second, not one per shard
every millisecond."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from helpers.topologies import load_topology

from causal_client.data import Mutation
from causal_client.label import Label
from services.bulk.tail import GearTail, TailLabels
from services.labelpath.pump import LabelPump
from services.proto import saturn_pb2
from services.region.store import RegionStore

pytestmark = pytest.mark.cluster  # starts a Redis server

HEARTBEAT_S = 2.0  # the sink's heartbeat period here: long, so a prompt label shows no heartbeat helped it


class RecordingPump(LabelPump):
    """The pump with a recorder where the sink's tree link would be."""

    def __init__(self, topology, store: RegionStore):
        super().__init__(topology, "virginia")
        self.gears = store.shards
        self.out: list[tuple[str, int]] = []  # ("label" | "heartbeat", ts), in the order sent
        self.sent_at: dict[int, float] = {}

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        now = asyncio.get_running_loop().time()
        for label in labels:
            self.out.append(("label", label.ts))
            self.sent_at[label.ts] = now
        if labels:
            self.reached(self.others)

    def send_heartbeat(self, ts: int, regions: tuple[str, ...]) -> None:
        self.out.append(("heartbeat", ts))
        self.reached(regions or self.others)


def two_shard_store(redis_url: str):
    data = load_topology("demo-3region.toml", protocol="saturn").model_dump()
    data["regions"][0]["shards"] = 2
    data["saturn"] = {**data.get("saturn", {}), "sink_heartbeat_s": HEARTBEAT_S, "tree_silence_s": 10.0}
    topology = load_topology(data)
    urls = [redis_url, redis_url.rsplit("/", 1)[0] + "/1"]  # two keyspaces, one server
    return topology, RegionStore(topology, "virginia", urls=urls)


def rows_by_shard(topology) -> list[list[str]]:
    rows = [f"r{i}" for i in range(60)]
    return [[r for r in rows if topology.shard_of("virginia", "all", r) == k] for k in (0, 1)]


def write(store: RegionStore, row: str, past: Label | None = None):
    return store.write(past or Label.zero(), [Mutation("all", row, [("s", "c", b"v")])])


def ahead(ms: float) -> Label:
    """A past from a region whose clock runs ``ms`` ahead of this one's."""
    return Label(ts=int(time.time() * 1e6 + ms * 1000), src="ireland/0")


def counted(pump: RecordingPump) -> dict[str, int]:
    """Counts the pump's store calls that read labels or ask for heartbeats."""
    calls = {"reads": 0, "heartbeats": 0}
    kinds = {
        "stream_after": "reads",
        "stream_between": "reads",
        "heartbeat": "heartbeats",
        "heartbeat_after": "heartbeats",
    }
    for shard in pump.gears:
        for name, kind in kinds.items():
            original = getattr(shard, name)

            async def counting(*args, _original=original, _kind=kind, **kwargs):
                calls[_kind] += 1
                return await _original(*args, **kwargs)

            setattr(shard, name, counting)
    return calls


async def pumping(pump: RecordingPump, stop: asyncio.Event) -> asyncio.Task:
    cursors = await pump.cursors()
    return asyncio.create_task(pump.pump_merged(cursors, stop))


@pytest.mark.parametrize("reader", ["pump", "bulk tail"])
def test_labels_of_two_shards_go_once_in_order_and_no_heartbeat_is_passed_by_a_later_label(
    redis_url: str, reader: str
):
    """Read by the pump itself, or from the bulk sender's tails (the sink in the sender's
    process: one read of the one stream for a write's payload and label)."""

    async def scenario() -> None:
        topology, store = two_shard_store(redis_url)
        await store.install()
        pump = RecordingPump(topology, store)
        stop = asyncio.Event()
        tails = [GearTail(shard, heartbeat_s=0.05) for shard in store.shards]
        if reader == "bulk tail":
            pump.sources = [TailLabels(tail) for tail in tails]
        tailing = [asyncio.create_task(tail.run(stop)) for tail in tails if reader == "bulk tail"]
        task = await pumping(pump, stop)
        by_shard = rows_by_shard(topology)
        rng = random.Random(7)
        made: list[int] = []
        for i in range(300):
            if i % 25 == 0:  # shard 1 labels 300 ms ahead, then shard 0 below it, read after it
                # (300, not less: on a loaded machine the next write may come tens of ms later)
                made.append((await write(store, by_shard[1][0], ahead(300))).ts)
                made.append((await write(store, by_shard[0][0])).ts)
                assert made[-1] < made[-2]
            label = await write(store, rng.choice(by_shard[rng.randrange(2)]))
            made.append(label.ts)
            if rng.random() < 0.1:
                await asyncio.sleep(rng.choice([0.0005, 0.002, 0.01]))
        await asyncio.sleep(1.0)  # past the last label ahead: every shard's clock passes it
        stop.set()
        await asyncio.gather(task, *tailing)
        labels = [ts for kind, ts in pump.out if kind == "label"]
        assert sorted(labels) == sorted(made), "every label goes out exactly once"
        assert labels == sorted(labels), "in ts order across the shards"
        promised = 0
        for kind, ts in pump.out:
            if kind == "label":
                assert ts > promised, f"label {ts} after a heartbeat that promised {promised}"
            else:
                promised = max(promised, ts)

    asyncio.run(scenario())


def test_a_label_on_one_shard_is_not_held_by_an_idle_other_and_idle_costs_few_calls(redis_url: str):
    async def scenario() -> None:
        topology, store = two_shard_store(redis_url)
        await store.install()
        pump = RecordingPump(topology, store)
        calls = counted(pump)
        stop = asyncio.Event()
        task = await pumping(pump, stop)
        await asyncio.sleep(0.3)  # the first heartbeat (due at once) is out
        before = dict(calls)
        await asyncio.sleep(1.0)  # idle
        idle = {kind: calls[kind] - before[kind] for kind in calls}
        # The millisecond poll made a heartbeat call and a range read per shard every tick: about
        # 4,000 calls in this second. Tails block; heartbeats come every HEARTBEAT_S.
        assert idle["reads"] + idle["heartbeats"] <= 8, f"an idle second cost {idle}"
        loop = asyncio.get_running_loop()
        for k, rows in enumerate(rows_by_shard(topology)):
            started = loop.time()
            label = await write(store, rows[0])
            for _ in range(200):
                if label.ts in pump.sent_at:
                    break
                await asyncio.sleep(0.005)
            waited = pump.sent_at.get(label.ts, float("inf")) - started
            assert waited < HEARTBEAT_S / 2, f"a label of shard {k} waited {waited:.3f} s for the other shard"
        stop.set()
        await task

    asyncio.run(scenario())
