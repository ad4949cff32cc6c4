"""What transactions cost: ``python -m loadtest bench txn [--seconds S] [--clients C]
[--protocol P] [--out DIR] [--quick]``.

On two-region with four shards per region, closed-loop clients at the first region write batches
of 2, 4 and 8 rows spread over 1 to 4 shards, atomically (a write-only transaction) and with
``atomic=False`` (each row its own update), the two phases back to back for each shape so that
they are compared on the same machine state; then read the same shapes with ``multi_read`` (a
read-only transaction). A one-row write gives the local round trip the overhead is counted in.

Prints ops/s, p50 and p99 per phase, atomic/non-atomic throughput, and the atomic batch's extra
p50 latency in local round trips (Eiger: 1.5); writes ``txn.json`` and ``txn.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

from causal_client import CausalClient, Mutation, ReadSpec
from causal_client.wire import shard_of
from loadtest.harness.cluster import find_base_port, started, with_overrides, with_shards
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.loop import run_closed_loop, summarize
from loadtest.harness.options import positive
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, publish, render_table, say
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "two-region.toml"
SHARDS = 4
GROUP = "all"
SHAPES = [(2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 1), (8, 2), (8, 4)]  # (rows, shards they span)
QUICK_SHAPES = [(2, 1), (2, 2), (4, 4)]


@dataclass
class Figure:
    rows: int
    shards: int
    phase: str  # "atomic", "non-atomic", "multi_read", "one row"
    ops_per_s: float
    p50_ms: float | None
    p99_ms: float | None


def spread_rows(rows: int, shards: int, prefix: str) -> list[str]:
    """``rows`` row names on exactly ``shards`` shards (of SHARDS), as evenly as it goes."""
    wanted = [k % shards for k in range(rows)]
    found: dict[int, list[str]] = {k: [] for k in range(shards)}
    for i in itertools.count():
        name = f"{prefix}{i}"
        shard = shard_of(GROUP, name, SHARDS)
        if shard < shards and len(found[shard]) < wanted.count(shard):
            found[shard].append(name)
        if all(len(found[k]) == wanted.count(k) for k in range(shards)):
            return [name for k in range(shards) for name in found[k]]
    raise AssertionError("unreachable")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds", type=positive(float), default=4.0, help="measured seconds per phase (default: 4)"
    )
    parser.add_argument("--clients", type=positive(int), default=4, help="closed-loop clients (default: 4)")


def run(args: argparse.Namespace) -> int:
    shapes = QUICK_SHAPES if args.quick else SHAPES
    seconds = 2.0 if args.quick else args.seconds
    topology = with_shards(with_overrides(Topology.load(TOPOLOGY), protocol=args.protocol), SHARDS)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    figures: list[Figure] = []
    with (
        tempfile.TemporaryDirectory() as run_dir,
        started(topology, Path(run_dir)),
        CausalClient.connect(topology.client_address("a")) as client,
    ):

        def measure(label: str, rows: int, shards: int, op_for) -> Figure:
            ops = [op_for(i) for i in range(args.clients)]
            stats = run_closed_loop(ops, warmup=0.5, duration=seconds)
            phase = summarize("causal", label, stats, seconds)
            figure = Figure(rows, shards, label, phase.ops_per_s, phase.p50_ms, phase.p99_ms)
            say(f"  {rows} rows / {shards} shards, {label}: {num(figure.ops_per_s, 0)} ops/s, "
                f"p50 {num(figure.p50_ms, 2)} ms")  # fmt: skip
            figures.append(figure)
            return figure

        def writer(rows: list[str], atomic: bool):
            session = client.session("a")
            value = itertools.count()

            def op() -> bool:
                session.batch([Mutation(GROUP, r).set("v", str(next(value))) for r in rows], atomic=atomic)
                return True

            return op

        def reader(rows: list[str]):
            session = client.session("a")
            specs = [ReadSpec(GROUP, r, ("v",)) for r in rows]
            return lambda: bool(session.multi_read(specs)) and False

        say(
            f"[{args.protocol}] {args.clients} clients, {seconds:.0f} s per phase, {SHARDS} shards per region"
        )
        measure("one row", 1, 1, lambda i: writer(spread_rows(1, 1, f"one{i}-"), True))
        for rows, shards in shapes:
            names = {i: spread_rows(rows, shards, f"b{rows}.{shards}.{i}-") for i in range(args.clients)}
            measure("atomic", rows, shards, lambda i, n=names: writer(n[i], True))
            measure("non-atomic", rows, shards, lambda i, n=names: writer(n[i], False))
            measure("multi_read", rows, shards, lambda i, n=names: reader(n[i]))
    one = next(f for f in figures if f.phase == "one row")
    table = []
    for rows, shards in shapes:
        atomic, plain, read = (
            next(f for f in figures if (f.rows, f.shards, f.phase) == (rows, shards, p))
            for p in ("atomic", "non-atomic", "multi_read")
        )
        extra_rt = (
            (atomic.p50_ms - plain.p50_ms) / one.p50_ms
            if atomic.p50_ms and plain.p50_ms and one.p50_ms
            else None
        )
        table.append([
            f"{rows} rows / {shards} shards", num(atomic.ops_per_s, 0), num(atomic.p50_ms, 2),
            num(plain.ops_per_s, 0), num(plain.p50_ms, 2),
            num(atomic.ops_per_s / plain.ops_per_s if plain.ops_per_s else None, 2), num(extra_rt, 2),
            num(read.ops_per_s, 0), num(read.p50_ms, 2),
        ])  # fmt: skip
    headers = ["batch", "atomic ops/s", "p50 ms", "non-atomic ops/s", "p50 ms", "atomic/non",
               "+RT (p50)", "multi_read ops/s", "p50 ms"]  # fmt: skip
    title = (
        f"Transactions ({args.protocol}, {args.clients} clients, {SHARDS} shards; a one-row write: "
        f"{num(one.ops_per_s, 0)} ops/s, p50 {num(one.p50_ms, 2)} ms = one local round trip)"
    )
    publish(
        Path(args.out),
        "txn",
        figures,
        render_table(title, headers, table),
        lambda path: plot(figures, shapes, path),
    )
    return PASSED


def plot(figures: list[Figure], shapes: list[tuple[int, int]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.27
    for j, (phase, colour) in enumerate(
        (("atomic", "#1f77b4"), ("non-atomic", "#999999"), ("multi_read", "#2ca02c"))
    ):
        values = [
            next(f.p50_ms or 0 for f in figures if (f.rows, f.shards, f.phase) == (r, s, phase))
            for r, s in shapes
        ]
        ax.bar([i + (j - 1) * width for i in range(len(shapes))], values, width, label=phase, color=colour)
    ax.set_xticks(range(len(shapes)), [f"{r} rows\n{s} shards" for r, s in shapes])
    ax.set_ylabel("p50 latency, ms")
    ax.set_title("Atomic and non-atomic batches, multi-reads (read-only transactions)")
    ax.legend()
    save(fig, path)


EXPERIMENT = Experiment(
    name="txn",
    summary="what transactions cost: atomic and non-atomic batches and multi-reads over shards",
    minutes=(1.0, 2.5),
    run=run,
    arguments=arguments,
    shared={"protocol": "saturn", "quick": "three shapes, two-second phases", "out": "bench-results"},
    about=__doc__ or "",
)
