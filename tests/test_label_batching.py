"""How the label sink batches (services/labelpath/pump.py): as Saturn's own sink does, it drains
what is ready and never waits for company. A label written alone leaves at once, in a batch of
one; labels written while the sink is busy leave together, in the next batch. A real Redis and
the real gears; the tree link is replaced by a recorder."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from helpers.topologies import load_topology

from causal_client.data import Mutation
from causal_client.label import Label
from services.labelpath.pump import LabelPump
from services.region.store import RegionStore

pytestmark = pytest.mark.cluster  # starts a Redis server


class Recorder(LabelPump):
    """The pump, sending to a list: (when, how many labels) per batch."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.batches: list[tuple[float, int]] = []
        self.busy_s = 0.0  # how long each send keeps the pump busy (a slow link, a loaded CPU)
        self.busy = threading.Event()  # set while a send keeps it busy
        self.sent_at: dict[str, float] = {}  # row -> when its label left

    def send(self, labels) -> None:
        if labels:
            self.batches.append((time.monotonic(), len(labels)))
            for label in labels:
                self.sent_at[label.target.split("/", 1)[1]] = time.monotonic()
            if self.busy_s:
                self.busy.set()
                time.sleep(self.busy_s)  # blocks the loop: what arrives meanwhile waits for the next read
                self.busy.clear()

    def send_heartbeat(self, ts: int, regions: tuple[str, ...]) -> None:
        self.reached(regions)


async def write_one(store: RegionStore, row: str) -> float:
    await store.write(Label.zero(), [Mutation("all", row).set("v", b"1")])
    return time.monotonic()


def write_from_another_thread(
    topology, redis_url: str, rows: list[str], when: threading.Event
) -> threading.Thread:
    """Clients are other processes: they write while the sink's process is busy (once ``when``)."""

    async def writes() -> None:
        when.wait(10)
        store = RegionStore(topology, "virginia", urls=[redis_url])
        for row in rows:
            await write_one(store, row)
        await store.close()

    thread = threading.Thread(target=asyncio.run, args=(writes(),))
    thread.start()
    return thread


def test_a_label_alone_leaves_at_once_and_a_burst_leaves_together(redis_url: str):
    async def scenario() -> tuple[list[float], list[tuple[float, int]], list[float]]:
        topology = load_topology("demo-3region.toml", protocol="saturn")
        store = RegionStore(topology, "virginia", urls=[redis_url])
        await store.install()
        pump = Recorder(topology, "virginia")
        pump.gears = store.shards  # the pump reads this store
        stop = asyncio.Event()
        running = asyncio.gather(*pump.pumping(await pump.cursors(), stop))
        await asyncio.sleep(0.1)
        delays = []
        for i in range(5):  # alone: each leaves by itself, at once
            written = await write_one(store, f"alone{i}")
            while len(pump.batches) < i + 1:
                await asyncio.sleep(0.0005)
            delays.append(pump.batches[-1][0] - written)
            await asyncio.sleep(0.02)
        pump.busy_s = 0.5
        rows = [f"burst{i}" for i in range(20)]
        writer = write_from_another_thread(topology, redis_url, rows, pump.busy)
        await write_one(store, "first")  # the pump sends it, and is busy 500 ms: the burst comes then
        await asyncio.sleep(0.1)
        writer.join()
        pump.busy_s = 0.0
        await asyncio.sleep(0.3)
        steady = []  # 250 labels/s for 0.4 s: above what once made a sink linger (150/s)
        for i in range(100):
            steady.append((f"steady{i}", await write_one(store, f"steady{i}")))
            await asyncio.sleep(0.004)
        await asyncio.sleep(0.05)
        stop.set()
        await running
        await store.close()
        return delays, pump.batches, sorted(pump.sent_at[row] - written for row, written in steady)

    delays, batches, steady = asyncio.run(scenario())
    assert [count for _, count in batches[:5]] == [1] * 5
    assert max(delays) < 0.05, f"a label alone waited {max(delays) * 1000:.1f} ms for company"
    assert [count for _, count in batches[5:7]] == [1, 20], batches[5:7]
    p90 = steady[len(steady) * 9 // 10]  # a sink that lingered 10 ms above 150 labels/s: 9 ms
    assert p90 < 0.005, f"at 250 labels/s a label waited {p90 * 1000:.1f} ms (p90) to leave"
