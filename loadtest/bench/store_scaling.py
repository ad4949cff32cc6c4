"""Eiger's scaling experiment (§6) on this system: a region's throughput against the number of
masters of its store, ``python -m loadtest bench store-scaling [--quick] --out DIR``.

Every region's store is a Redis Cluster of M masters (no replicas: what is measured is how the
work spreads, not what durability costs) holding the same eight shards, for M in 1, 2, 4, 8
(``--masters``). The Facebook workload (the load test's store target: Locust clients calling
the gears directly, the social graph placed over the regions by a plan) runs on each, the same
plan, a fresh cluster each time. Reported: operations per second, per master, and failed calls,
as a table (``store-scaling.json``) and a plot (``store-scaling.png``). Masters spread the
stores' work over processes, so the curve rises only while cores are free: on two cores the
load generator and the services take them first, and the curve is flat; the point of running it
is on a machine with more cores than processes to keep busy. Each row says how many cores the
machine that measured it had.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from loadtest.harness.experiment import FAILED, PASSED, Experiment
from loadtest.harness.options import numbers, positive
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.workload.locust_run import LocustOptions
from loadtest.workload.plan import make_plan
from loadtest.workload.run import run_protocol
from services.topology import Topology

SHARDS = 8  # every run's: the data's shape does not change with the masters


@dataclass
class Point:
    masters: int
    protocol: str
    ops_per_s: float
    failed: int
    cores: int  # of the machine that measured it


def with_masters(base: Topology, masters: int) -> Topology:
    data = base.model_dump()
    for region in data["regions"]:
        region["shards"] = SHARDS
    data["store"] = {"engine": "cluster", "masters": masters, "replicas": 0}
    return Topology.from_dict(data, source=base.source)


def measure(
    base: Topology, masters: list[int], protocol: str, users: int, clients: int, duration: float, out: Path
) -> list[Point]:
    options = LocustOptions(user_class="StoreUser", clients=clients, duration=duration)
    points = []
    for i, m in enumerate(masters, 1):
        plan_dir = out / f"plan-{m}"
        say(f"[{i}/{len(masters)}] {m} master(s) per region: planning {users:,} users over {base.name} ...")
        make_plan(with_masters(base, m), plan_dir, users)
        run = run_protocol(plan_dir, protocol, options, out / f"masters-{m}", say)
        points.append(Point(m, protocol, run.ops_per_s, run.failed, os.cpu_count() or 1))
        say(f"  {m} master(s): {run.ops_per_s:,.0f} ops/s, {run.failed} failed")
    return points


def table(points: list[Point]) -> str:
    rows = [[str(p.masters), p.protocol, num(p.ops_per_s, 0), num(p.ops_per_s / p.masters, 0), str(p.failed),
             str(p.cores)] for p in points]  # fmt: skip
    heads = ["masters per region", "protocol", "ops/s", "ops/s per master", "failed", "cores"]
    return render_table(
        "a region's store over more masters (the Facebook workload, store target)", heads, rows
    )


def plot(points: list[Point], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.8))
    xs = [p.masters for p in points]
    ax.plot(xs, [p.ops_per_s for p in points], "o-", label=f"{points[0].protocol}, {points[0].cores} cores")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("masters per region (Redis Cluster)")
    ax.set_ylabel("operations / s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle("Scaling a region's store (Eiger §6's experiment)", fontsize=10)
    save(fig, path, dpi=120)


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--masters", type=numbers(int), help="masters per region, a list (default: 1,2,4,8; --quick: 1,2)")
    add("--clients", type=positive(int), default=16, help="Locust users (default: 16)")


def run(args: argparse.Namespace) -> int:
    masters = args.masters or ([1, 2] if args.quick else [1, 2, 4, 8])
    users, duration = (300, 8.0) if args.quick else (2000, 30.0)
    out = Path(args.out)
    base = Topology.load(args.topology)
    points = measure(base, masters, args.protocol, users, args.clients, duration, out)
    publish(out, "store-scaling", points, table(points), lambda path: plot(points, path))
    return FAILED if any(p.failed for p in points) else PASSED


EXPERIMENT = Experiment(
    name="store-scaling",
    summary="Eiger's scaling experiment: a region's throughput over 1, 2, 4, 8 masters of its store",
    minutes=(2.0, 6.0),
    run=run,
    arguments=arguments,
    shared={
        "topology": Path(__file__).resolve().parents[2] / "topologies" / "two-region.toml",
        "protocol": "saturn",
        "quick": "masters 1 and 2, 300 users, 8 s a run",
        "out": None,
    },
    about=__doc__ or "",
)
