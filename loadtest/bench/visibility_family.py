"""Remote-update visibility figures: several configurations (a topology file under a protocol),
each a fresh run of its regions with paced probe writes at every region, compared pair by pair.
The paper's Fig. 4 (configurations of Saturn) and Fig. 7 (the four protocols) are two of them
(``fig4.py``, ``fig7.py``). Extra visibility = visibility minus the pair's configured bulk latency.
Prints the mean extra visibility of every configuration, overall and for the figure's two pairs,
and per pair; ``--out`` writes the rows as JSON and two PNGs: the CDFs of the two pairs and the
extra visibility of every pair.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import PASSED, BenchError, Experiment, Paper
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.options import positive
from loadtest.harness.probes import Prober, Snapshot, merged, wait_flowing
from loadtest.harness.report import num, render_table, say, write_rows
from loadtest.harness.stats import to_ms
from services.topology import Topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


@dataclass(frozen=True)
class Configuration:
    name: str
    topology_file: str
    protocol: str
    #: done to the running cluster before measuring (Fig. 4's P kills the serializers)
    prepare: Callable | None = None
    note: str = ""


@dataclass(frozen=True)
class Figure:
    name: str  # file names: NAME.json, NAME-cdf.png, NAME-pairs.png
    title: str
    configurations: list[Configuration]
    pairs: list[Pair]  # the two whose CDFs are drawn
    colours: dict[str, str] = field(default_factory=dict)


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


def rows_for(name: str, topology: Topology, now: Snapshot, then: Snapshot) -> list[PairRow]:
    rows = []
    for origin in topology.region_names:
        for region in topology.region_names:
            if origin == region:
                continue
            delta = merged(now, then, [(origin, region)])
            bulk = topology.region_latency_ms(origin, region)
            mean = to_ms(delta.mean)
            cdf = delta.cdf_ms()
            excess = None if mean is None else mean - bulk
            p90 = to_ms(delta.quantile(0.9))
            rows.append(PairRow(name, origin, region, bulk, int(delta.count), mean, excess, p90, cdf))
    return rows


def measure(configuration: Configuration, rate: float, seconds: float) -> list[PairRow]:
    topology = Topology.load(TOPOLOGIES / configuration.topology_file)
    topology = with_overrides(topology, protocol=configuration.protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    with tempfile.TemporaryDirectory() as scratch, started(topology, Path(scratch)) as cluster:
        if configuration.prepare is not None:
            configuration.prepare(cluster)
        with Prober(cluster.topology, rate):
            wait_flowing(cluster.topology)
            then = scrape_visibility(cluster.topology)
            time.sleep(seconds)
            now = scrape_visibility(cluster.topology)
        return rows_for(configuration.name, cluster.topology, now, then)


def mean_extra(rows: list[PairRow]) -> float | None:
    counted = [r for r in rows if r.extra_ms is not None]
    return sum(r.extra_ms for r in counted) / len(counted) if counted else None  # type: ignore[misc]


def extra_over_updates(rows: list[PairRow]) -> float | None:
    """The extra visibility averaged over every update (pairs weighted by what they carried)."""
    weighted = [(r.extra_ms, r.updates) for r in rows if r.extra_ms is not None and r.updates]
    total = sum(updates for _, updates in weighted)
    return sum(ms * updates for ms, updates in weighted) / total if total else None


def summary_table(figure: Figure, rows: list[PairRow]) -> str:
    names = list(dict.fromkeys(r.configuration for r in rows))
    lines = []
    for name in names:
        mine = [r for r in rows if r.configuration == name]
        pairs = {(r.origin, r.region): r for r in mine}
        cells = [name, f"{sum(r.updates for r in mine):,}", num(extra_over_updates(mine), sign=True)]
        cells.append(num(mean_extra(mine), sign=True))
        for pair in figure.pairs:
            row = pairs[pair]
            cells += [num(row.mean_ms), num(row.p90_ms)]
        lines.append(cells)
    heads = [f"{short(o)}→{short(d)} {what}" for o, d in figure.pairs for what in ("mean ms", "p90")]
    n_pairs = len({(r.origin, r.region) for r in rows})
    return render_table(
        f"{figure.title}: extra visibility = visibility minus the pair's bulk latency",
        ["configuration", "updates", "extra ms, over updates", f"over {n_pairs} pairs", *heads],
        lines,
    )


def short(region: str) -> str:
    return region[:3]


def per_pair(rows: list[PairRow]) -> str:
    names = list(dict.fromkeys(r.configuration for r in rows))
    by = {(r.configuration, r.origin, r.region): r for r in rows}
    pairs = sorted({(r.origin, r.region, r.bulk_ms) for r in rows}, key=lambda p: (p[2], p[0], p[1]))
    lines = [[f"{o} → {d}", f"{bulk:g}"] + [num(by[n, o, d].extra_ms, sign=True) for n in names]
             for o, d, bulk in pairs]  # fmt: skip
    return render_table("extra visibility per pair (ms)", ["pair", "bulk ms", *names], lines)


def plot(figure: Figure, rows: list[PairRow], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r.configuration for r in rows))
    by = {(r.configuration, r.origin, r.region): r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (origin, region) in zip(axes, figure.pairs, strict=True):
        for name in names:
            cdf = by[name, origin, region].cdf
            xs, ys = [x for x, _ in cdf], [y for _, y in cdf]
            ax.step(xs, ys, where="post", label=name, color=figure.colours.get(name))
        ax.set_title(f"{origin} → {region} ({by[names[0], origin, region].bulk_ms:g} ms)", fontsize=10)
        ax.set_xlabel("remote update visibility (ms)")
        ax.set_xlim(0, max(400, 2.5 * by[names[0], origin, region].bulk_ms))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    cdf_path = out / f"{figure.name}-cdf.png"
    fig.savefig(cdf_path, dpi=120)
    plt.close(fig)

    pairs = sorted({(r.origin, r.region, r.bulk_ms) for r in rows}, key=lambda p: (p[2], p[0], p[1]))
    fig, ax = plt.subplots(figsize=(12, 4.2))
    for name in names:
        mine = [by[name, o, d] for o, d, _ in pairs]
        label = f"{name} (mean {num(mean_extra(mine), sign=True)} ms)"
        ys = [math.nan if r.extra_ms is None else r.extra_ms for r in mine]
        ax.plot(range(len(pairs)), ys, "o", ms=4, label=label, color=figure.colours.get(name))
    ax.set_xticks(range(len(pairs)), [f"{o[:3]}→{d[:3]}" for o, d, _ in pairs], rotation=90, fontsize=7)
    ax.set_ylabel("visibility minus bulk latency (ms)")
    ax.set_title(f"{figure.title}: extra visibility per pair (pairs by bulk latency)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=len(names))
    fig.tight_layout()
    pairs_path = out / f"{figure.name}-pairs.png"
    fig.savefig(pairs_path, dpi=120)
    plt.close(fig)
    return [cdf_path, pairs_path]


def experiment(
    figure: Figure, summary: str, minutes: tuple[float, float], about: str, paper: Paper | None = None
) -> Experiment:
    """The experiment that draws ``figure`` (``python -m loadtest bench fig4``)."""

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--rate", type=positive(float), default=10.0, help="probe writes/s per region")
        parser.add_argument("--only", help="comma-separated configurations (default: all)")

    def run(args: argparse.Namespace) -> int:
        seconds = 4.0 if args.quick else 12.0
        known = [c.name for c in figure.configurations]
        only = args.only.split(",") if args.only else known
        if unknown := set(only) - set(known):
            raise BenchError(f"no configuration {', '.join(sorted(unknown))} (known: {', '.join(known)})")
        chosen = [c for c in figure.configurations if c.name in only]
        rows: list[PairRow] = []
        for i, configuration in enumerate(chosen, 1):
            what = f"{configuration.topology_file} under {configuration.protocol}{configuration.note}"
            pace = f"{args.rate:g} writes/s per region for {seconds:g} s"
            say(f"[{i}/{len(chosen)}] {configuration.name}: {what}, {pace} ...")
            rows += measure(configuration, args.rate, seconds)
        print(summary_table(figure, rows))
        print()
        print(per_pair(rows))
        write_rows(args.out, figure.name, rows)
        if args.out:
            for path in plot(figure, rows, Path(args.out)):
                say(f"wrote {path}")
        return PASSED

    return Experiment(
        name=figure.name, summary=summary, minutes=minutes, run=run, arguments=arguments, about=about,
        shared={"quick": "4 s per configuration instead of 12", "out": f"bench-results/{figure.name}"},
        paper=paper,
    )  # fmt: skip
