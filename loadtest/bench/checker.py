"""How fast the checkers are: ``python -m loadtest bench checker [--lengths LIST] [--strong-lengths
LIST] [--history DIR] [--rounds N]``.

The causal checker (loadtest/check/causal.py) and the linearizability checker
(loadtest/check/linearizable.py) each on histories of growing length, made without a cluster
(loadtest/check/simulated.py: sessions of three regions on a store that applies remote writes in
causal order; registers whose operations take effect at an instant of their interval), and on
recorded ones (``--history``: the ``*.jsonl.gz`` a soak writes, checked again). Each is timed on
one core, the best of ``--rounds``, and reported as operations checked per second and as growth:
the time per operation at each length over the time per operation at the shortest (1.0 is
linear; quadratic would be the length ratio). A linearizability search that runs out of budget
is counted as undecided, never as a pass.

Target: the causal checker at 100,000 operations a second or more on one core, at every length
of 100,000 operations or more (exit status 1 otherwise); histories of ``causal=False`` (eventual
delivery) are checked once each to show the checker still finds what it is for.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from loadtest.check.causal import check
from loadtest.check.history import read_ops
from loadtest.check.linearizable import check_linearizable
from loadtest.check.simulated import causal_history, linearizable_history
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment
from loadtest.harness.options import Meaning, numbers
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, publish, render_table, say

R = TypeVar("R")
CAUSAL_TARGET = 100_000  # operations checked per second, on one core
TARGET_FROM = 100_000  # ... at every history at least this long (short ones pay fixed costs)


@dataclass
class Row:
    checker: str  # "causal", "linearizable"
    history: str  # "simulated" or a recorded file's name
    operations: int
    seconds: float
    ops_per_s: float
    growth: float  # seconds per op over that of the shortest history of this checker (1.0: linear)
    found: int  # anomalies (causal) or non-linearizable keys
    undecided: int = 0


def timed(run: Callable[[], R], rounds: int) -> tuple[float, R]:
    """The best of ``rounds`` timings of ``run``, and what it returned."""
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - began)
    return best, result


def causal_rows(lengths: list[int], rounds: int) -> list[Row]:
    rows = []
    for length in lengths:
        history = causal_history(length)
        seconds, result = timed(functools.partial(check, history), rounds)
        rows.append(Row("causal", "simulated", length, seconds, length / seconds, 0.0, result.violations))
        say(f"  causal, {length:>9,} ops: {seconds:6.2f} s, {length / seconds:>9,.0f} ops/s, "
            f"{result.violations} anomalies")  # fmt: skip
        eventual = check(causal_history(min(length, 50_000), causal=False)).violations
        if eventual == 0:
            raise BenchError(f"the checker found nothing in an eventual history of {length:,} ops")
    return rows


def recorded_rows(directory: Path, rounds: int) -> list[Row]:
    rows = []
    for path in sorted(directory.rglob("*.jsonl.gz")):
        ops = read_ops(path)
        if not ops:
            continue
        seconds, result = timed(functools.partial(check, ops), rounds)
        rows.append(Row("causal", path.name, len(ops), seconds, len(ops) / seconds, 0.0, result.violations))
        say(f"  causal, {path.name}: {len(ops):,} ops, {len(ops) / seconds:,.0f} ops/s")
    return rows


def linearizable_rows(lengths: list[int], rounds: int) -> list[Row]:
    rows = []
    for length in lengths:
        history = linearizable_history(length)
        seconds, result = timed(functools.partial(check_linearizable, history), rounds)
        rows.append(Row("linearizable", "simulated", length, seconds, length / seconds, 0.0,
                        result.violations, result.undecided))  # fmt: skip
        say(f"  linearizable, {length:>9,} ops: {seconds:6.2f} s, {length / seconds:>9,.0f} ops/s, "
            f"{result.violations} not linearizable, {result.undecided} undecided")  # fmt: skip
    return rows


def with_growth(rows: list[Row]) -> list[Row]:
    simulated = [r for r in rows if r.history == "simulated"]
    if simulated:
        first = min(simulated, key=lambda r: r.operations)
        for row in simulated:
            row.growth = (row.seconds / row.operations) / (first.seconds / first.operations)
    return rows


def table(rows: list[Row]) -> str:
    lines = [
        [r.checker, r.history, f"{r.operations:,}", num(r.seconds, 2), f"{r.ops_per_s:,.0f}",
         num(r.growth, 2) if r.history == "simulated" else "-", str(r.found), str(r.undecided)]
        for r in rows
    ]  # fmt: skip
    headers = ["checker", "history", "operations", "seconds", "ops/s", "growth", "found", "undecided"]
    return render_table("Checkers on one core (best of the rounds)", headers, lines)


def plot(rows: list[Row], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4))
    for checker, marker in (("causal", "o"), ("linearizable", "s")):
        mine = sorted((r for r in rows if r.checker == checker and r.history == "simulated"),
                      key=lambda r: r.operations)  # fmt: skip
        if mine:
            ax.plot([r.operations for r in mine], [r.ops_per_s for r in mine], marker=marker, label=checker)
    ax.axhline(CAUSAL_TARGET, color="#888888", linestyle="--", linewidth=1, label="causal target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("history length (operations)")
    ax.set_ylabel("operations checked per second (one core)")
    ax.set_title("The checkers: flat lines are linear in the history's length")
    ax.legend()
    save(fig, path)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lengths", type=numbers(int), default=[10_000, 30_000, 100_000, 300_000, 1_000_000],
        help="causal history lengths (default: 10k to 1M)",
    )  # fmt: skip
    parser.add_argument(
        "--strong-lengths", type=numbers(int), default=[1_000, 3_000, 10_000, 30_000],
        help="strong history lengths (default: 1k to 30k)",
    )  # fmt: skip
    parser.add_argument("--history", help="a directory of recorded histories (*.jsonl.gz) to check as well")


def run(args: argparse.Namespace) -> int:
    if hasattr(os, "sched_setaffinity"):  # one core, as the target says (numpy's loops are serial)
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    lengths = [10_000, 100_000] if args.quick else args.lengths
    strong = [1_000, 3_000] if args.quick else args.strong_lengths
    say("the causal checker ...")
    rows = causal_rows(lengths, args.rounds)
    if args.history:
        rows += recorded_rows(Path(args.history), args.rounds)
    say("the linearizability checker ...")
    rows += linearizable_rows(strong, args.rounds)
    with_growth([r for r in rows if r.checker == "causal"])
    with_growth([r for r in rows if r.checker == "linearizable"])
    publish(Path(args.out), "checker", rows, table(rows), lambda path: plot(rows, path))
    causal = [r for r in rows if r.checker == "causal" and r.operations >= TARGET_FROM]
    slow = [r for r in causal if r.ops_per_s < CAUSAL_TARGET]
    undecided = sum(r.undecided for r in rows)
    for row in slow:
        say(f"below the target: {row.history} {row.operations:,} ops at {row.ops_per_s:,.0f} ops/s "
            f"(target {CAUSAL_TARGET:,})")  # fmt: skip
    if undecided:
        say(f"{undecided} linearizability searches ran out of budget (undecided: never a pass)")
    return FAILED if slow or undecided else PASSED


EXPERIMENT = Experiment(
    name="checker",
    summary="the causal and linearizability checkers: operations checked per second, growth with length",
    minutes=(0.5, 3.0),
    run=run,
    arguments=arguments,
    shared={
        "rounds": Meaning(3, "timings of each history; the best counts"),
        "quick": "10k and 100k operations",
        "out": "bench-results/checker",
    },
    about=__doc__ or "",
)
