"""The paper's Fig. 8: the Facebook workload (this project's Locust load test, store target) under
the four protocols, for each maximum number of replicas of a user's data: throughput normalised
to ``eventual`` and extra visibility over it. ``python -m loadtest paper fig8 [--quick]``.

For every maximum (2 to 5, the paper's x-axis; ``--quick``: 2 and 5) a plan is made (the social
graph placed over the topology's regions, at least 2 and at most that many replicas), then each
protocol runs it on a fresh cluster (``loadtest.run.run_protocol``: seeding, Locust, the
services' metrics). Writes ``fig8.json`` and ``fig8.png`` (two panels, as the paper's 8a) and
prints a table.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from loadtest.bench.report import PROTOCOL_COLOURS, num, publish, render_table, say
from loadtest.locust_run import LocustOptions
from loadtest.plan import make_plan
from loadtest.run import run_protocol
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "ec2-7region-m.toml"
PROTOCOLS = ("eventual", "saturn", "gentlerain", "cure")


@dataclass
class Point:
    max_replicas: int
    protocol: str
    ops_per_s: float
    throughput_ratio: float | None  # to eventual at the same maximum
    visibility_ms: float | None
    extra_ms: float | None  # over eventual at the same maximum
    failed: int


def measure(
    topology: Path,
    maxima: list[int],
    users: int,
    clients: int,
    duration: float,
    out: Path,
    protocols: tuple[str, ...] = PROTOCOLS,
) -> list[Point]:
    """Every protocol at every maximum; ``eventual`` must be among ``protocols`` (the reference)."""
    base = Topology.load(topology)
    options = LocustOptions(user_class="StoreUser", clients=clients, duration=duration)
    points: list[Point] = []
    for i, most in enumerate(maxima, 1):
        plan_dir = out / f"plan-{most}"
        say(f"[{i}/{len(maxima)}] at most {most} replicas: planning {users:,} users over {base.name} ...")
        make_plan(base, plan_dir, users, 1, 2, most)
        runs = {p: run_protocol(plan_dir, p, options, out / f"max-{most}", say) for p in protocols}
        reference = runs["eventual"]
        for protocol, run in runs.items():
            seen, base_seen = run.visibility_mean_ms(), reference.visibility_mean_ms()
            ratio = run.ops_per_s / reference.ops_per_s if reference.ops_per_s else None
            extra = None if seen is None or base_seen is None else seen - base_seen
            points.append(Point(most, protocol, run.ops_per_s, ratio, seen, extra, run.failed))
    return points


def table(points: list[Point]) -> str:
    rows = [
        [str(p.max_replicas), p.protocol, f"{p.ops_per_s:,.0f}", num(p.throughput_ratio, digits=3),
         num(p.visibility_ms), num(p.extra_ms, sign=True), str(p.failed)]
        for p in points
    ]  # fmt: skip
    heads = ["max replicas", "protocol", "ops/s", "/ eventual", "visibility ms", "extra ms", "failed"]
    return render_table("Fig. 8, the Facebook workload", heads, rows)


def plot(points: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for protocol in dict.fromkeys(p.protocol for p in points):
        mine = [p for p in points if p.protocol == protocol]
        xs = [p.max_replicas for p in mine]
        left.plot(
            xs, [p.throughput_ratio for p in mine], "o-", label=protocol, color=PROTOCOL_COLOURS.get(protocol)
        )
        if protocol != "eventual":
            right.plot(
                xs, [p.extra_ms for p in mine], "o-", label=protocol, color=PROTOCOL_COLOURS.get(protocol)
            )
    left.set_ylabel("throughput / eventual")
    right.set_ylabel("extra visibility over eventual (ms)")
    for ax in (left, right):
        ax.set_xlabel("maximum replicas of a user's data")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Fig. 8: the Facebook workload under the four protocols", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.fig8", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="maxima 2 and 5, 500 users, 8 s per run")
    parser.add_argument("--topology", default=str(TOPOLOGY), help="default: ec2-7region-m.toml")
    parser.add_argument("--clients", type=int, default=20, help="Locust users (default: 20)")
    parser.add_argument("--out", required=True, help="directory for fig8.json, fig8.png and the runs")
    args = parser.parse_args(argv)
    maxima = [2, 5] if args.quick else [2, 3, 4, 5]
    users, duration = (500, 8.0) if args.quick else (2000, 30.0)
    out = Path(args.out)
    points = measure(Path(args.topology), maxima, users, args.clients, duration, out)
    publish(out, "fig8", points, table(points), lambda path: plot(points, path))
    return 1 if any(p.failed for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
