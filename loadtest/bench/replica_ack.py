"""What it costs to acknowledge a write only once a replica has it: ``python -m loadtest bench
replica-ack``.

A region on Redis Cluster (issue: a region that outgrows one host) promotes a replica when a
master dies; a write acknowledged before the replica had it would be lost with the master. Redis's
answer is ``WAIT numreplicas timeout`` after the write, on the same connection (it waits for that
connection's last write). This experiment measures that price on the store's real write gear:
one master with the gears library (AOF with the topology's default, ``appendfsync always``), one
replica attached, and clients writing one row each call, sequentially per client:

- ``alone``: the master without a replica (today's store);
- ``replica, ack at once``: the replica attached, the write acknowledged when the master has it;
- ``replica, WAIT 1``: the write and ``WAIT 1 <timeout>`` pipelined on one connection, so the
  acknowledgement comes once the replica has it (in memory: what a promotion keeps).

Prints writes/s and latency per variant and number of clients, and each variant's throughput
against ``alone``; ``--out`` also writes JSON. Real processes on loopback: the replica's round
trip here is a local one, far below a datacentre's, so the figure is the floor of the price.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis
import redis.asyncio as aioredis

from causal_client import wire
from causal_client.data import Mutation
from causal_client.label import Label
from causal_client.transactions import write_args
from loadtest.harness.experiment import PASSED, BenchError, Experiment
from loadtest.harness.options import numbers, positive
from loadtest.harness.report import render_table, say, write_rows
from loadtest.harness.stats import Latency
from services.launcher.redis_binary import find_redis_server
from services.region.store import RegionStore
from services.topology import Topology

REGION = "virginia"
WAIT_TIMEOUT_MS = 1000
VARIANTS = ("alone", "replica, ack at once", "replica, WAIT 1")


@dataclass
class Result:
    variant: str
    clients: int
    writes: int
    writes_per_s: float
    p50_us: float
    p99_us: float
    unacked: int  # writes whose WAIT said fewer replicas than asked (0 with a healthy replica)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def redis_process(directory: Path, *extra: str) -> Iterator[str]:
    """A redis-server of its own on loopback (AOF on, fsync always, as the region's stores)."""
    port = free_port()
    directory.mkdir(parents=True, exist_ok=True)
    command = [
        find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--save", "", "--appendonly", "yes", "--appendfsync", "always", *extra,
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            if time.monotonic() > deadline:
                raise BenchError("redis-server did not start")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)


def wait_for_replica(master_url: str, timeout_s: float = 20.0) -> None:
    db = redis.Redis.from_url(master_url)
    deadline = time.monotonic() + timeout_s
    while db.info("replication").get("connected_slaves", 0) < 1 or db.wait(1, 1000) < 1:
        if time.monotonic() > deadline:
            raise BenchError("the replica did not catch up with the master")
        time.sleep(0.1)


async def write_load(url: str, clients: int, writes: int, wait: bool) -> tuple[list[float], float, int]:
    """``clients`` connections writing ``writes`` rows in all, one gear call each; per write its
    latency (s), and the run's wall time and count of writes WAIT did not see replicated."""
    db = aioredis.Redis.from_url(url, max_connections=clients)
    latencies: list[float] = []
    unacked = 0

    async def client(index: int) -> None:
        nonlocal unacked
        for i in range(writes // clients):
            args = write_args(Label.zero(), ["1"], [Mutation("all", f"c{index}-{i}").set("v", b"x" * 100)])
            started = time.perf_counter()
            if wait:
                pipe = db.pipeline(transaction=False)  # one connection: WAIT waits for this write
                pipe.execute_command("FCALL", wire.WRITE, 1, wire.shard_tag(0), *args)
                pipe.execute_command("WAIT", 1, WAIT_TIMEOUT_MS)
                _, replicas = await pipe.execute()
                unacked += int(replicas) < 1
            else:
                await db.execute_command("FCALL", wire.WRITE, 1, wire.shard_tag(0), *args)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    wall = time.perf_counter() - started
    await db.aclose()
    return latencies, wall, unacked


def measure(topology: Topology, url: str, variant: str, clients: int, writes: int) -> Result:
    asyncio.run(RegionStore(topology, REGION, urls=[url]).install())
    asyncio.run(write_load(url, clients, max(clients, writes // 10), variant.endswith("WAIT 1")))  # warm
    latencies, wall, unacked = asyncio.run(write_load(url, clients, writes, variant.endswith("WAIT 1")))
    summary = Latency.of([s * 1000 for s in latencies])
    p50, p99 = (1000 * (ms or 0.0) for ms in (summary.p50_ms, summary.p99_ms))
    return Result(variant, clients, len(latencies), len(latencies) / wall, p50, p99, unacked)


def run(args: argparse.Namespace) -> int:
    topology = Topology.load(Path(args.topology))
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="replica-ack-") as scratch:
        for round_number in range(1, args.rounds + 1):  # alternating: the machine is shared
            for clients in args.clients:
                say(f"round {round_number}, {clients} client(s): alone ...")
                with redis_process(Path(scratch) / f"alone-{round_number}-{clients}") as url:
                    results.append(measure(topology, url, VARIANTS[0], clients, args.writes))
                base = Path(scratch) / f"pair-{round_number}-{clients}"
                with redis_process(base / "master") as master:
                    port = master.rsplit(":", 1)[1].split("/")[0]
                    with redis_process(base / "replica", "--replicaof", "127.0.0.1", port):
                        wait_for_replica(master)
                        for variant in VARIANTS[1:]:
                            say(f"round {round_number}, {clients} client(s): {variant} ...")
                            results.append(measure(topology, master, variant, clients, args.writes))
    report(results)
    write_rows(args.out, "replica-ack", results)
    return PASSED


def report(results: list[Result]) -> None:
    alone: dict[int, list[float]] = {}
    for r in results:
        if r.variant == VARIANTS[0]:
            alone.setdefault(r.clients, []).append(r.writes_per_s)
    rows = []
    for r in results:
        base = sum(alone[r.clients]) / len(alone[r.clients])
        rows.append([
            r.variant, str(r.clients), f"{r.writes_per_s:.0f}", f"{r.p50_us:.0f}", f"{r.p99_us:.0f}",
            f"{r.writes_per_s / base:.2f}", str(r.unacked),
        ])  # fmt: skip
    print(render_table(
        "The write gear with and without a replica's acknowledgement",
        ["variant", "clients", "writes/s", "p50 µs", "p99 µs", "/ alone", "not replicated"], rows,
    ))  # fmt: skip


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--writes", type=positive(int), default=3000, help="writes per variant (default: 3000)"
    )
    parser.add_argument(
        "--clients", type=numbers(int), default=[1, 8], help="clients writing at once, a list (default: 1,8)"
    )


EXPERIMENT = Experiment(
    name="replica-ack",
    summary="what acknowledging a write only once a replica has it (WAIT) costs the write gear",
    minutes=(0.5, 1),
    run=run,
    arguments=arguments,
    shared={"topology": "topologies/demo-3region.toml", "rounds": 2, "out": ""},
    about=__doc__ or "",
)
