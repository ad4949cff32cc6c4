"""How often a multi-row read sees part of a batch: ``python -m loadtest bench fractured``
[--shards N] [--rows K] [--seconds S] [--protocol P] [--topology FILE] [--non-atomic].

A writer at the first region writes ``--rows`` rows, each on a different shard of its region,
with one ``batch`` of mutations carrying the same value, again and again; a reader at every
region ``multi_read``s all the rows in a loop. A read is *fractured* when its rows do not all
carry the same value: it saw part of a batch without the rest (read atomicity, Eiger §4). With
one shard per region one gear call covers every row and no read is fractured; with rows on
different shards, each shard applies its part on its own, locally and at the replicas.

Prints, per region, the reads, the fractured ones and their share. Batches are write-only
transactions and multi-reads read-only ones (causal_client/transactions.py), so none is
fractured; ``--non-atomic`` writes the batches with ``atomic=False`` (each row its own update),
where reads do see parts of batches: what the transactions prevent.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from pathlib import Path

from causal_client import CausalClient, CausalError, Mutation, ReadSpec
from causal_client.wire import shard_of
from loadtest.harness.cluster import find_base_port, started, with_overrides, with_shards
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment
from loadtest.harness.options import positive
from loadtest.harness.report import render_table, say
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "two-region.toml"
GROUP = "all"


def rows_on_distinct_shards(shards: int, count: int, prefix: str) -> list[str]:
    """``count`` row names whose rows fall on ``count`` different shards (one shard: all on it,
    the case where one gear call covers the whole batch)."""
    if shards == 1:
        return [f"{prefix}{i}" for i in range(count)]
    if count > shards:
        raise BenchError(f"--rows {count} needs at least as many shards (--shards {shards})")
    chosen: dict[int, str] = {}
    for i in itertools.count():
        row = f"{prefix}{i}"
        chosen.setdefault(shard_of(GROUP, row, shards), row)
        if len(chosen) == count:
            return [chosen[s] for s in sorted(chosen)]
    raise AssertionError("unreachable")


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--shards", type=positive(int), default=2, help="shards per region (default: 2)")
    add("--rows", type=positive(int), default=2, help="rows per batch, each on its own shard (default: 2)")
    add("--seconds", type=positive(float), default=10.0, help="seconds measured (default: 10)")
    add("--non-atomic", action="store_true", help="batches with atomic=False")


def run(args: argparse.Namespace) -> int:
    topology = with_shards(with_overrides(Topology.load(args.topology), protocol=args.protocol), args.shards)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    if GROUP not in topology.group_members:
        raise BenchError(f"{args.topology}: the bench writes group {GROUP!r}, which it does not have")
    rows = rows_on_distinct_shards(args.shards, args.rows, f"fr{time.monotonic_ns()}-")
    writer_region, regions = topology.region_names[0], topology.region_names
    stop = threading.Event()
    batches = [0]
    tally = {r: [0, 0] for r in regions}  # reads, fractured
    errors: list[str] = []

    with (
        tempfile.TemporaryDirectory() as run_dir,
        started(topology, Path(run_dir)),
        CausalClient.connect(topology.client_address(writer_region)) as client,
    ):

        def write() -> None:
            session = client.session(writer_region)
            for n in itertools.count():
                if stop.is_set():
                    return
                mutations = [Mutation(GROUP, row).update({"v": str(n)}) for row in rows]
                session.batch(mutations, atomic=not args.non_atomic)
                batches[0] += 1

        def read(region: str) -> None:
            session = client.session(region)
            specs = [ReadSpec(GROUP, row, ("v",)) for row in rows]
            while not stop.is_set():
                values = {r.text("v") for r in session.multi_read(specs)}
                tally[region][0] += 1
                tally[region][1] += len(values) > 1

        def recorded(work, *args) -> None:
            try:
                work(*args)
            except CausalError as exc:  # said at the end, not lost with the thread
                errors.append(f"{work.__name__}{args}: {exc!r}")
                stop.set()

        threads = [threading.Thread(target=recorded, args=(write,), daemon=True)]
        threads += [threading.Thread(target=recorded, args=(read, r), daemon=True) for r in regions]
        for thread in threads:
            thread.start()
        say(f"[{args.protocol}] {args.rows} rows over {args.shards} shard(s), {args.seconds:.0f} s")
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join(30)
    table = [
        [region + (" (writer's)" if region == writer_region else ""), f"{reads:,}", f"{bad:,}",
         f"{100 * bad / reads:.1f} %" if reads else "-"]
        for region, (reads, bad) in tally.items()
    ]  # fmt: skip
    kind = "non-atomic" if args.non_atomic else "atomic"
    title = (
        f"Fractured reads: {batches[0]:,} {kind} batches of {args.rows} rows, {args.shards} shards "
        f"({args.protocol})"
    )
    print(render_table(title, ["region", "reads", "fractured", "share"], table))
    for error in errors:
        say(f"error: {error}")
    return FAILED if errors else PASSED


EXPERIMENT = Experiment(
    name="fractured",
    summary="how often a multi-row read sees part of a batch, atomic or not, over shards",
    minutes=(0.5, 0.5),
    run=run,
    arguments=arguments,
    shared={"topology": TOPOLOGY, "protocol": "saturn"},
    about=__doc__ or "",
)
