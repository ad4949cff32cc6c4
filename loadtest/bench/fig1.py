"""The paper's Fig. 1, the problem Saturn answers: ``python -m loadtest bench fig1 [--quick] --out DIR``.

(a) *Throughput against freshness*: GentleRain (one scalar of metadata) and Cure (a vector, an
entry per datacenter) against eventual consistency as datacenters are added, 3 to 7 of
ec2-7region (its first N regions: the US ones first, then Europe, then Asia-Pacific), under full
replication: the throughput penalty (%) and the data-staleness overhead (%), that is the remote
updates' mean visibility over eventual's. (b) *Partial replication*: on all seven regions, the
staleness overhead as the replication degree falls from 5 to 2 (each client writes and reads
rows that its region and its d - 1 closest regions replicate), "until only datacenters close to
each other replicate the same data". Saturn beside them, as the paper's later figures put it.

Everything else is Fig. 5's workload at its defaults (``synthetic.py``: 2-byte values, 90:10
reads:writes, closed-loop clients at every region; ``synthetic_family.measure_protocol`` runs it). For (a)
each N gets its own Saturn tree from the configuration generator (every pair weighs the same under
full replication); (b) runs on the tree generated for the workload's traffic
(ec2-7region-mx.toml). Writes ``fig1.json`` and ``fig1.png``.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from loadtest.bench.synthetic_family import Mix, Settings, first_regions, measure_protocol, write_topology
from loadtest.bench.synthetic_family import Point as RunPoint
from loadtest.harness.comparison import mean, rows_of
from loadtest.harness.experiment import FAILED, PASSED, Experiment, Paper
from loadtest.harness.options import positive
from loadtest.harness.plots import colour, plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.harness.stats import median_present
from services.topology import Topology

BASE = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region.toml"
PARTIAL = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region-mx.toml"
PROTOCOLS = ("eventual", "gentlerain", "cure", "saturn")
DATACENTERS, DATACENTERS_QUICK = (3, 4, 5, 6, 7), (3, 7)
DEGREES, DEGREES_QUICK = (5, 4, 3, 2), (5, 2)
FULL = Mix(correlation="full")


@dataclass
class Point(RunPoint):
    panel: str = "a"  # "a": datacenters added under full replication; "b": replication degree
    datacenters: int = 7

    @property
    def x(self) -> int:
        """The panel's horizontal axis: datacenters in (a), the replication degree in (b)."""
        return self.datacenters if self.panel == "a" else self.replicas


@dataclass(frozen=True)
class Plan:
    """What one run measures: (a) on ``base``'s first N regions for each N of ``counts``, (b) on
    ``partial`` at each replication degree of ``degrees``."""

    base: Path = BASE
    partial: Path = PARTIAL
    counts: tuple[int, ...] = DATACENTERS
    degrees: tuple[int, ...] = DEGREES
    protocols: tuple[str, ...] = PROTOCOLS

    @property
    def clusters(self) -> int:
        return len(self.protocols) * (len(self.counts) + 1)


QUICK = Plan(counts=DATACENTERS_QUICK, degrees=DEGREES_QUICK)


def measure(plan: Plan, settings: Settings, rounds: int, out: Path) -> list[Point]:
    base = Topology.load(plan.base)
    topologies = {n: first_regions(base, n, out / f"topology-{n}dc.toml") for n in plan.counts}
    partial = write_topology(Topology.load(plan.partial), out / "topology-partial.toml")
    degrees = [Mix(replicas=d) for d in plan.degrees]
    points: list[Point] = []
    for round_ in range(1, rounds + 1):
        for protocol in plan.protocols:
            say(f"== round {round_}/{rounds}: {protocol}")
            for n, topology in topologies.items():
                run = out / f"run-{protocol}-{n}dc-{round_}"
                measured = measure_protocol(protocol, topology, [FULL], settings, run, round_)
                points += [Point(**asdict(p), panel="a", datacenters=n) for p in measured]
            run = out / f"run-{protocol}-partial-{round_}"
            measured = measure_protocol(protocol, partial, degrees, settings, run, round_)
            points += [Point(**asdict(p), panel="b", datacenters=len(base.regions)) for p in measured]
    return points


# -- reading the points ---------------------------------------------------------------------------
def _median(points: list[Point], panel: str, x: int, protocol: str, field: str) -> float | None:
    """One figure of one protocol at one x of a panel, the median over the rounds (as Fig. 5's)."""
    return median_present(
        [getattr(p, field) for p in points if (p.panel, p.x, p.protocol) == (panel, x, protocol)]
    )


def throughput_penalty(points: list[Point], panel: str, x: int, protocol: str) -> float | None:
    """Percent of eventual's throughput lost (negative: slower), as the paper's Fig. 1a."""
    mine, base = (_median(points, panel, x, p, "ops_per_s") for p in (protocol, "eventual"))
    return 100 * (mine / base - 1) if mine is not None and base else None


def staleness_overhead(points: list[Point], panel: str, x: int, protocol: str) -> float | None:
    """Percent by which remote updates' mean visibility exceeds eventual's."""
    mine, base = (_median(points, panel, x, p, "visibility_ms") for p in (protocol, "eventual"))
    return 100 * (mine / base - 1) if mine is not None and base else None


def xs(points: list[Point], panel: str) -> list[int]:
    found = sorted({p.x for p in points if p.panel == panel})
    return found if panel == "a" else found[::-1]  # (b) as the paper draws it: degree 5 down to 2


def table(points: list[Point]) -> str:
    parts = []
    for panel, title, axis in (
        ("a", "Fig. 1a: full replication, datacenters added", "datacenters"),
        ("b", "Fig. 1b: seven datacenters, replication degree falling", "degree"),
    ):
        rows = [
            [str(x), protocol, num(_median(points, panel, x, protocol, "ops_per_s"), 0),
             num(throughput_penalty(points, panel, x, protocol), sign=True),
             num(_median(points, panel, x, protocol, "visibility_ms")),
             num(staleness_overhead(points, panel, x, protocol), 0, sign=True)]
            for x in xs(points, panel)
            for protocol in PROTOCOLS
            if _median(points, panel, x, protocol, "ops_per_s") is not None
        ]  # fmt: skip
        heads = [axis, "protocol", "ops/s", "throughput %", "visibility ms", "staleness overhead %"]
        parts.append(render_table(f"{title} (against eventual; medians over rounds)", heads, rows))
    return "\n\n".join(parts)


def _drawn(value: float | None) -> float:
    """A gap in the line where nothing was measured."""
    return math.nan if value is None else value


def plot(points: list[Point], path: Path) -> None:
    fig, (penalty, stale, partial) = plt.subplots(1, 3, figsize=(13, 3.9))
    for protocol in PROTOCOLS[1:]:
        style = {"color": colour(protocol), "label": protocol, "marker": "o"}
        a = xs(points, "a")
        penalty.plot(a, [_drawn(throughput_penalty(points, "a", x, protocol)) for x in a], **style)
        stale.plot(a, [_drawn(staleness_overhead(points, "a", x, protocol)) for x in a], **style)
        b = xs(points, "b")
        positions = list(range(len(b)))
        partial.plot(positions, [_drawn(staleness_overhead(points, "b", x, protocol)) for x in b], **style)
        partial.set_xticks(positions, [str(x) for x in b])
    penalty.set(title="(a) throughput penalty", xlabel="datacenters", ylabel="% of eventual's throughput")
    stale.set(
        title="(a) data staleness overhead", xlabel="datacenters", ylabel="% over eventual's visibility"
    )
    partial.set(
        title="(b) partial geo-replication", xlabel="replication degree", ylabel="staleness overhead %"
    )
    for ax in (penalty, stale, partial):
        ax.grid(alpha=0.3)
        ax.axhline(0, color=colour("eventual"), lw=0.8)
    stale.legend(fontsize=8)
    fig.suptitle("Fig. 1: causal consistency's price against eventual (this machine)", fontsize=11)
    save(fig, path, dpi=120)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clients", type=positive(int), default=2, help="closed-loop clients per region (default: 2)"
    )


def run(args: argparse.Namespace) -> int:
    settings = Settings(args.clients, *((1.0, 3.0) if args.quick else (2.0, 10.0)))
    plan = QUICK if args.quick else Plan()
    clusters = args.rounds * plan.clusters
    minutes = clusters * (15 + settings.warmup + settings.duration + 1) / 60
    say(f"Fig. 1: {clusters} clusters, {settings.duration:g} s a point: about {minutes:.0f} minutes")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    points = measure(plan, settings, args.rounds, out)
    publish(out, "fig1", points, table(points), lambda path: plot(points, path))
    return FAILED if any(p.errors for p in points) else PASSED


# -- the paper's Fig. 1 beside this run (python -m loadtest paper fig1) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    points = [Point(**row) for row in rows_of(out / "fig1.json")]
    counts, degrees = xs(points, "a"), xs(points, "b")
    protocols = ("gentlerain", "cure", "saturn")

    def penalty(protocol: str) -> float:
        """The throughput penalty (%) averaged over the datacenter counts."""
        return mean([v for x in counts if (v := throughput_penalty(points, "a", x, protocol)) is not None])

    def stale(panel: str, x: int, protocol: str) -> float:
        value = staleness_overhead(points, panel, x, protocol)
        return float("nan") if value is None else value

    def row(what: str, paper: str, value: Callable[[str], float], digits: int = 0) -> list[str]:
        return [what, paper, " / ".join(num(value(p), digits, sign=True) for p in protocols)]

    most, high, low = max(counts), degrees[0], degrees[-1]
    table = [
        row("(a) throughput %, mean over N, GentleRain / Cure / Saturn", "small / ≈ -20 / -", penalty, 1),
        *(
            row(
                f"(a) staleness overhead % at {n} datacenters",
                "large / small / -",
                functools.partial(stale, "a", n),
            )
            for n in (counts[0], most)
        ),
        *(
            row(
                f"(b) staleness overhead % at degree {d}",
                "grows to ≈ 800 / low / -",
                functools.partial(stale, "b", d),
            )
            for d in (high, low)
        ),
    ]
    fresher = stale("a", most, "gentlerain") > stale("a", most, "cure")
    tradeoff = fresher and penalty("gentlerain") > penalty("cure")
    partial = stale("b", low, "gentlerain") > stale("b", high, "gentlerain")
    escapes = stale("a", most, "saturn") < stale("a", most, "gentlerain") and penalty("saturn") > penalty(
        "cure"
    )
    escape_word = "escapes" if escapes else "does not escape"
    verdict = (
        f"The trade-off of (a) {'shows' if tradeoff else 'does not show'}: GentleRain loses less throughput "
        "than Cure and makes updates visible later. (b) GentleRain's staleness overhead "
        f"{'grows' if partial else 'does not grow'} as the replication degree falls: its one scalar waits "
        f"for every region, whether it replicates the data or not. Saturn {escape_word} the trade-off "
        "(fresher than GentleRain, faster than Cure). The overheads are percentages "
        "of eventual's visibility: long under full replication on seven regions (the mean pair is far), "
        "short at degree 2 (close pairs), so the same milliseconds weigh more there."
    )
    return table, verdict


EXPERIMENT = Experiment(
    name="fig1",
    summary="Saturn Fig. 1: GentleRain's and Cure's price against eventual as regions come and replicas go",
    minutes=(5.0, 11.0),
    run=run,
    arguments=arguments,
    shared={"rounds": 1, "quick": "3 and 7 datacenters, degrees 5 and 2, 3 s a point", "out": None},
    paper=Paper(compare),
    about=__doc__ or "",
)
