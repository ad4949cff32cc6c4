"""Helpers for the transaction tests: topologies with several shards, rows placed on distinct
shards, a writer of batches and readers that count fractured reads, and a child process that
stops in the middle of a batch (to be killed there)."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from causal_client import CausalClient, Mutation, ReadSpec, transactions, wire
from causal_client.wire import shard_of
from helpers.deadlines import scaled, wait_for
from helpers.topologies import load_topology
from services.region import gears
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("before-commit", "before-settle")  # where the child stops


def sharded(name: str, protocol: str, shards: int) -> Topology:
    """A shipped topology with ``shards`` shards in every region."""
    data = load_topology(name, protocol=protocol).model_dump()
    for region in data["regions"]:
        region["shards"] = shards
    return load_topology(data)


def rows_on_shards(cells: list[str], shards: int, prefix: str) -> list[str]:
    """One row name per entry of ``cells`` (each a group), all on different shards."""
    taken: set[int] = set()
    names: list[str] = []
    for group in cells:
        for i in itertools.count():
            name = f"{prefix}{group}-{i}"
            shard = shard_of(group, name, shards)
            if shard not in taken:
                taken.add(shard)
                names.append(name)
                break
    return names


def count_fractured(
    client: CausalClient,
    writer: str,
    rows: list[tuple[str, str]],
    readers: dict[str, list[tuple[str, str]]],
    seconds: float,
    atomic: bool = True,
    at_least: int = 21,
) -> tuple[int, dict[str, tuple[int, int]]]:
    """Batches setting column v of every (group, row) of ``rows`` to one value, written at
    ``writer`` for ``seconds``, while each reader region multi-reads its rows: returns the
    batches written and, per reader, (reads, fractured reads: rows that disagree). The run goes
    on past ``seconds`` until ``at_least`` batches and as many reads at each region were made
    (a loaded machine makes fewer a second), under a deadline."""
    stop = threading.Event()
    written = [0]
    tally = {region: [0, 0] for region in readers}
    failures: list[BaseException] = []

    def write() -> None:
        session = client.session(writer)
        for n in itertools.count(1):
            if stop.is_set():
                return
            session.batch([Mutation(g, r).update({"v": str(n)}) for g, r in rows], atomic=atomic)
            written[0] += 1

    def read(region: str) -> None:
        session = client.session(region, auto_migrate=False)
        specs = [ReadSpec(g, r, ("v",)) for g, r in readers[region]]
        while not stop.is_set():
            values = {row.text("v") for row in session.multi_read(specs)}
            tally[region][0] += 1
            tally[region][1] += len(values) > 1

    def guarded(work: Callable, *args) -> None:
        try:
            work(*args)
        except BaseException as exc:  # reported by the test
            failures.append(exc)
            stop.set()

    threads = [threading.Thread(target=guarded, args=(write,), daemon=True)]
    threads += [threading.Thread(target=guarded, args=(read, r), daemon=True) for r in readers]
    for thread in threads:
        thread.start()
    time.sleep(seconds)  # the run's length (a fixed time), then as long as it takes to have enough

    def enough() -> bool:
        return bool(failures) or (written[0] >= at_least and all(t[0] >= at_least for t in tally.values()))

    try:
        wait_for(enough, 60, f"{at_least} batches and as many reads at each region")
    finally:
        stop.set()
    for thread in threads:
        thread.join(scaled(30))
    if failures:
        raise failures[0]
    return written[0], {region: (reads, bad) for region, (reads, bad) in tally.items()}


def staged_parts(topology: Topology, region: str, shard: int | None = None) -> int:
    """Transaction parts staged (invisible, unsettled) on the region's shards (or one of them)."""
    total = 0
    for k in range(topology.region(region).shards) if shard is None else [shard]:
        with redis.Redis.from_url(topology.redis_url(region, k)) as store:
            total += store.zcard(gears.shard_key(gears.STAGED_KEY, topology.shard_tag(region, k)))
    return total


def start_stopping_writer(
    address: str, region: str, rows: list[tuple[str, str]], stage: str
) -> subprocess.Popen:
    """A child process that writes value "1" to every row in one batch, then a batch of "2"
    that stops ``stage`` (printing STOPPED): the caller kills it there."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests']\n"
        "from helpers.transactions import stopping_writer; stopping_writer(*sys.argv[2:])"
    )
    flat = [x for pair in rows for x in pair]
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(ROOT), address, region, stage, *flat],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    assert line == "STOPPED", f"the writer said {line!r}"
    return child


def stopping_writer(address: str, region: str, stage: str, *flat: str) -> None:
    """The child's side of :func:`start_stopping_writer` (real client, real gears)."""
    rows = list(zip(flat[::2], flat[1::2], strict=True))
    with CausalClient.connect(address) as client:
        session = client.session(region)
        session.batch([Mutation(g, r).update({"v": "1"}) for g, r in rows])
        transport = client.transport
        shards = len(transport.stores_of(region))  # type: ignore[attr-defined]

        def call(c: transactions.ShardCall):
            if stage == "before-commit" and c.function == wire.COMMIT:
                stop_here()
            reply = transport._gear(region, c.shard, c.function, c.args, read_only=c.read_only)  # type: ignore[attr-defined]
            if stage == "before-settle" and c.function == wire.COMMIT:
                stop_here()
            return reply

        mutations = [Mutation(g, r).update({"v": "2"}) for g, r in rows]
        gear_ids = [f"{region}/{k}" for k in range(shards)]
        transactions.run_sync(transactions.write_plan(session.label, mutations, shards, gear_ids), call)


def stop_here() -> None:
    print("STOPPED", flush=True)
    time.sleep(3600)
