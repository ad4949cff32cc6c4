"""One remote proxy's throughput and CPU per update: ``python -m loadtest bench proxy``.

A real region b (its Redis and its bulk receiver, where Saturn's remote proxy runs) started by the
launcher; every other process of the topology is stopped, and this process plays them: region
a's bulk sender (payload batches on a ``bulk`` link) and the serializer above b (label batches
on a tree link). For each batch size (labels per message: a sink batches under load) it sends
``--updates`` updates, each batch's payloads then its labels, as fast as the proxy takes them
(a window of batches in flight), and measures updates made visible per second end to end (b's
watermark for a reaching the last label) and the CPU per update of b's receiver and of b's Redis
(from /proc). Prints a table; ``--out`` also writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis

from loadtest.harness.cluster import one_serializer_topology
from loadtest.harness.cpu import cpu_seconds
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import numbers, positive
from loadtest.harness.report import num, render_table, say, write_rows
from services import plan, runtime
from services.bulk.receiver import BULK
from services.labelpath.links import OutgoingLink
from services.launcher.cluster import Cluster
from services.proto import bulk_pb2, saturn_pb2
from services.region import gears
from services.region.gears import ColumnChange
from services.region.remote_update import RemoteUpdate, RowChange
from services.topology import Topology
from services.transport.client import open_link
from services.transport.connection import Connection

ORIGIN_GEAR = "a/0"
WINDOW = 8  # batches sent ahead of the proxy's progress (the bulk sender's window is the same idea)
KEPT = ("b.redis", "b.bulk-receiver")  # every other process is played by this one, or stopped


@dataclass
class Row:
    batch: int
    updates: int
    seconds: float
    updates_per_s: float
    receiver_us_per_update: float
    redis_us_per_update: float
    receiver_cores: float


def payload(ts: int, i: int) -> bulk_pb2.Payload:
    """An update as a's write gear packs it (write.lua): one 16-byte value in a row of its own."""
    change = RowChange("all", f"r{i % 1000}", (ColumnChange("s", "v", b"x" * 16),))
    update = RemoteUpdate(ts, ORIGIN_GEAR, int(time.time() * 1e6), (change,))
    return bulk_pb2.Payload(ts=ts, body=update.pack())


def label(ts: int, i: int) -> saturn_pb2.TreeLabel:
    return saturn_pb2.TreeLabel(
        type=saturn_pb2.TREE_UPDATE, src=ORIGIN_GEAR, ts=ts, target=f"all/r{i % 1000}", group="all"
    )


class PlayedRegionA:
    """Region a's bulk sender and the serializer above b, as the bench plays them."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.link = OutgoingLink(topology, "s", "b")
        self.bulk: Connection | None = None
        self.store = aioredis.Redis.from_url(topology.redis_url("b", 0))

    async def connect_bulk(self) -> None:
        hello = bulk_pb2.Hello(origin_gear=ORIGIN_GEAR, origin_region="a").SerializeToString()
        self.bulk, _ = await open_link(self.topology.bulk_endpoint("b"), BULK, hello)
        self.bulk.deliver_to(lambda acks: None)  # positions and notices: read, not needed here

    def ship(self, batch: bulk_pb2.PayloadBatch) -> None:
        assert self.bulk is not None
        self.bulk.send(batch.SerializeToString())

    async def watermark(self) -> int:
        value = await self.store.hget(
            gears.shard_key(gears.WATERMARK_KEY, self.topology.shard_tag("b", 0)), "a"
        )
        return int(value) if value else 0

    async def until_watermark(self, ts: int, timeout_s: float = 600.0) -> None:
        deadline = time.monotonic() + timeout_s
        while await self.watermark() < ts:
            if time.monotonic() > deadline:
                raise TimeoutError(f"b's watermark for a did not reach {ts}")
            await asyncio.sleep(0.002)

    def send(self, start_ts: int, count: int, through_ts: int | None = None) -> None:
        stamps = range(start_ts, start_ts + count)
        batch = bulk_pb2.PayloadBatch(
            payloads=[payload(ts, ts) for ts in stamps], through_ts=through_ts or start_ts + count - 1
        )
        self.ship(batch)
        self.link.send([label(ts, ts) for ts in stamps])


async def measure(topology: Topology, pids: dict[str, int], batches: list[int], total: int) -> list[Row]:
    played = PlayedRegionA(topology)
    stop = asyncio.Event()
    linking = asyncio.create_task(played.link.run(stop))
    await played.connect_bulk()
    try:
        await asyncio.wait_for(played.link.connected.wait(), 30)
        # The proxy starts in timestamp order: it returns to the tree's order once the tree has
        # brought a label of a and bulk transfer has passed it (proxy.py).
        ts = max(await played.watermark(), int(time.time() * 1e6)) + 1
        played.link.send([saturn_pb2.TreeLabel(type=saturn_pb2.TREE_HEARTBEAT, src="a/sink", ts=ts)])
        played.ship(bulk_pb2.PayloadBatch(through_ts=ts))
        deadline = time.monotonic() + 30
        while not plan.proxy_in_tree_order(topology, "b"):
            if time.monotonic() > deadline:
                raise TimeoutError("b's proxy did not reach the tree's order")
            await asyncio.sleep(0.05)
        ts += 1
        played.send(ts, 1000)  # warm-up
        ts += 1000
        await played.until_watermark(ts - 1)
        rows = []
        for batch in batches:
            rows.append(await one_size(played, pids, batch, total, ts))
            ts += total
        return rows
    finally:
        stop.set()
        if played.bulk is not None:
            played.bulk.end()
        linking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await linking
        await played.store.aclose()


async def one_size(played: PlayedRegionA, pids: dict[str, int], batch: int, total: int, first: int) -> Row:
    before = {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
    started = time.perf_counter()
    sent = 0
    while sent < total:
        count = min(batch, total - sent)
        played.send(first + sent, count)
        sent += count
        # Flow control: at most WINDOW batches beyond what the proxy has made visible.
        if sent > WINDOW * batch:
            await played.until_watermark(first + sent - WINDOW * batch - 1)
    await played.until_watermark(first + total - 1)
    seconds = time.perf_counter() - started
    cpu = {name: (cpu_seconds(pid) or 0.0) - before[name] for name, pid in pids.items()}
    row = Row(
        batch, total, seconds, total / seconds, cpu["b.bulk-receiver"] / total * 1e6,
        cpu["b.redis"] / total * 1e6, cpu["b.bulk-receiver"] / seconds,
    )  # fmt: skip
    say(
        f"  batch {batch:>5}: {num(row.updates_per_s)} updates/s, receiver "
        f"{row.receiver_us_per_update:.1f} µs and Redis {row.redis_us_per_update:.1f} µs of CPU per update"
    )
    return row


def run_batches(batches: list[int], total: int) -> list[Row]:
    """Region b's proxy alone, ``total`` updates through it at each batch size."""
    topology = one_serializer_topology()
    with tempfile.TemporaryDirectory() as scratch, Cluster(topology, Path(scratch)) as cluster:
        for name in reversed(list(cluster.specs)):
            if not name.startswith(KEPT):
                cluster.kill(name)
        running = cluster.processes.items()
        pids = {kept: next(p.popen.pid for n, p in running if n.startswith(kept)) for kept in KEPT}
        with asyncio.Runner(loop_factory=runtime.event_loop_factory()) as runner:
            return runner.run(measure(topology, pids, batches, total))


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--updates", type=positive(int), default=20_000, help="updates per batch size (default 20,000)")
    add("--batches", type=numbers(int), default="1,10,100", help="labels per message, comma-separated")


def run(args: argparse.Namespace) -> int:
    say(f"one remote proxy, {args.updates:,} updates per batch size, {os.cpu_count()} CPUs ...")
    rows = run_batches(args.batches, args.updates)
    print(render_table(
        "one remote proxy: updates made visible, end to end",
        ["labels per message", "updates/s", "receiver µs CPU per update", "Redis µs CPU per update",
         "receiver cores"],
        [
            [str(r.batch), num(r.updates_per_s), f"{r.receiver_us_per_update:.1f}",
             f"{r.redis_us_per_update:.1f}", f"{r.receiver_cores:.2f}"]
            for r in rows
        ],
    ))  # fmt: skip
    write_rows(args.out, "proxy", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="proxy",
    summary="one remote proxy's throughput and CPU per update, by labels per message",
    minutes=(0.75, 0.75),
    run=run,
    arguments=arguments,
    shared={"out": ""},
    about=__doc__ or "",
)
