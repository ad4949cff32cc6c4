"""The paper's Fig. 4 on ec2-7region: ``python -m loadtest.bench.fig4 [--quick] [--out DIR]``.

Remote-update visibility for five ways of ordering remote updates, each a fresh run of the seven
regions with paced probe writes at every region: the generated tree (M, ec2-7region-m.toml), the
hand-made chain (ec2-7region.toml), one serializer in Ireland (S, ec2-7region-s.toml), timestamp
order without a tree (P: the chain's regions with every serializer killed once running, so that
every proxy orders by timestamp, §6.1), and the per-pair optimum (``eventual``: an update is
visible as soon as its bulk link has brought it). Prints the mean extra visibility (over each
pair's bulk latency) of every configuration, overall and for the paper's two pairs, and per pair;
``--out`` writes the rows as JSON and two PNGs: the paper's CDFs (Ireland→Frankfurt,
Tokyo→Sydney) and the extra visibility of every pair.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.bench.cluster import BenchError, find_base_port, started, with_overrides
from loadtest.bench.metrics import Pair, scrape_visibility
from loadtest.bench.probing import Prober, Snapshot, merged, wait_flowing
from loadtest.bench.report import num, render_table, say, write_rows
from loadtest.bench.stats import to_ms
from services import plan
from services.topology import Topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
#: (name, topology file, protocol, without a tree)
CONFIGURATIONS = [
    ("optimum", "ec2-7region.toml", "eventual", False),
    ("M", "ec2-7region-m.toml", "saturn", False),
    ("chain", "ec2-7region.toml", "saturn", False),
    ("S", "ec2-7region-s.toml", "saturn", False),
    ("P", "ec2-7region.toml", "saturn", True),
]
PAPER_PAIRS: list[Pair] = [("ireland", "frankfurt"), ("tokyo", "sydney")]
COLOURS = {"optimum": "#555555", "M": "#1f77b4", "chain": "#2ca02c", "S": "#ff7f0e", "P": "#d62728"}


@dataclass
class PairRow:
    configuration: str
    origin: str
    region: str
    bulk_ms: float
    updates: int
    mean_ms: float | None
    extra_ms: float | None
    p90_ms: float | None
    cdf: list[tuple[float, float]]  # (visibility ms, fraction at or below)


def without_tree(cluster, timeout: float = 15.0) -> None:
    """Kills every serializer and waits until every proxy orders by timestamp (P)."""
    for spec in plan.serializers(cluster.topology, cluster.layout):
        cluster.kill(spec.name)
    deadline = time.monotonic() + timeout
    while any(plan.proxy_in_tree_order(cluster.topology, r) for r in cluster.topology.region_names):
        if time.monotonic() > deadline:
            raise BenchError("the proxies did not fall back to timestamp order without their tree")
        time.sleep(0.1)


def rows_for(name: str, topology: Topology, now: Snapshot, then: Snapshot) -> list[PairRow]:
    rows = []
    for origin in topology.region_names:
        for region in topology.region_names:
            if origin == region:
                continue
            delta = merged(now, then, [(origin, region)])
            bulk = topology.region_latency_ms(origin, region)
            mean = to_ms(delta.mean)
            cdf = [(bound * 1000, cumulative / delta.count) for bound, cumulative in delta.buckets
                   if delta.count and bound != float("inf")]  # fmt: skip
            excess = None if mean is None else mean - bulk
            p90 = to_ms(delta.quantile(0.9))
            rows.append(PairRow(name, origin, region, bulk, int(delta.count), mean, excess, p90, cdf))
    return rows


def measure(name: str, file: str, protocol: str, no_tree: bool, rate: float, seconds: float) -> list[PairRow]:
    topology = with_overrides(Topology.load(TOPOLOGIES / file), protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    with tempfile.TemporaryDirectory() as scratch, started(topology, Path(scratch)) as cluster:
        if no_tree:
            without_tree(cluster)
        with Prober(cluster.topology, rate):
            wait_flowing(cluster.topology)
            then = scrape_visibility(cluster.topology)
            time.sleep(seconds)
            now = scrape_visibility(cluster.topology)
        return rows_for(name, cluster.topology, now, then)


def mean_extra(rows: list[PairRow]) -> float | None:
    counted = [r for r in rows if r.extra_ms is not None]
    return sum(r.extra_ms for r in counted) / len(counted) if counted else None  # type: ignore[misc]


def summary(rows: list[PairRow]) -> str:
    names = list(dict.fromkeys(r.configuration for r in rows))
    lines = []
    for name in names:
        mine = [r for r in rows if r.configuration == name]
        pairs = {(r.origin, r.region): r for r in mine}
        cells = [name, num(mean_extra(mine), sign=True)]
        for pair in PAPER_PAIRS:
            row = pairs[pair]
            cells += [num(row.mean_ms), num(row.p90_ms)]
        lines.append(cells)
    return render_table(
        "Fig. 4, ec2-7region: extra visibility = visibility minus the pair's bulk latency",
        ["configuration", "extra ms, mean of 42 pairs", "I→F mean ms", "I→F p90", "T→S mean ms", "T→S p90"],
        lines,
    )


def per_pair(rows: list[PairRow]) -> str:
    names = list(dict.fromkeys(r.configuration for r in rows))
    by = {(r.configuration, r.origin, r.region): r for r in rows}
    pairs = sorted({(r.origin, r.region, r.bulk_ms) for r in rows}, key=lambda p: (p[2], p[0], p[1]))
    lines = [[f"{o} → {d}", f"{bulk:g}"] + [num(by[n, o, d].extra_ms, sign=True) for n in names]
             for o, d, bulk in pairs]  # fmt: skip
    return render_table("extra visibility per pair (ms)", ["pair", "bulk ms", *names], lines)


def plot(rows: list[PairRow], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.configuration for r in rows))
    by = {(r.configuration, r.origin, r.region): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (origin, region) in zip(axes, PAPER_PAIRS, strict=True):
        for name in names:
            cdf = by[name, origin, region].cdf
            xs, ys = [x for x, _ in cdf], [y for _, y in cdf]
            ax.step(xs, ys, where="post", label=name, color=COLOURS.get(name))
        ax.set_title(f"{origin} → {region} ({by[names[0], origin, region].bulk_ms:g} ms)", fontsize=10)
        ax.set_xlabel("remote update visibility (ms)")
        ax.set_xlim(0, max(400, 2.5 * by[names[0], origin, region].bulk_ms))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    cdf_path = out / "fig4-cdf.png"
    fig.savefig(cdf_path, dpi=120)
    plt.close(fig)

    pairs = sorted({(r.origin, r.region, r.bulk_ms) for r in rows}, key=lambda p: (p[2], p[0], p[1]))
    fig, ax = plt.subplots(figsize=(12, 4.2))
    for name in names:
        mine = [by[name, o, d] for o, d, _ in pairs]
        label = f"{name} (mean {num(mean_extra(mine), sign=True)} ms)"
        ys = [r.extra_ms for r in mine]
        ax.plot(range(len(pairs)), ys, "o", ms=4, label=label, color=COLOURS.get(name))
    ax.set_xticks(range(len(pairs)), [f"{o[:3]}→{d[:3]}" for o, d, _ in pairs], rotation=90, fontsize=7)
    ax.set_ylabel("visibility minus bulk latency (ms)")
    ax.set_title("ec2-7region: extra visibility per pair (pairs by bulk latency)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=len(names))
    fig.tight_layout()
    pairs_path = out / "fig4-pairs.png"
    fig.savefig(pairs_path, dpi=120)
    plt.close(fig)
    return [cdf_path, pairs_path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.bench.fig4", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="4 s per configuration instead of 12")
    parser.add_argument("--rate", type=float, default=10.0, help="probe writes per second per region")
    parser.add_argument("--only", help="comma-separated configurations (default: all five)")
    parser.add_argument("--out", help="directory for fig4.json and the PNGs")
    args = parser.parse_args(argv)
    seconds = 4.0 if args.quick else 12.0
    chosen = [c for c in CONFIGURATIONS if not args.only or c[0] in args.only.split(",")]
    rows: list[PairRow] = []
    for i, (name, file, protocol, no_tree) in enumerate(chosen, 1):
        killed = ", every serializer killed" if no_tree else ""
        say(f"[{i}/{len(chosen)}] {name}: {file} under {protocol}{killed}, "
            f"{args.rate:g} writes/s per region for {seconds:g} s ...")  # fmt: skip
        rows += measure(name, file, protocol, no_tree, args.rate, seconds)
    print(summary(rows))
    print()
    print(per_pair(rows))
    write_rows(args.out, "fig4", rows)
    if args.out:
        for path in plot(rows, Path(args.out)):
            say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
