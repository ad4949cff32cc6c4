"""The paper's Fig. 8: the Facebook workload (this project's Locust load test, store target) under
the four protocols, for each maximum number of replicas of a user's data: throughput normalised
to ``eventual`` and extra visibility over it: ``python -m loadtest bench fig8 [--quick] --out DIR``
(``python -m loadtest paper fig8`` sets the paper's figures beside it).

For every maximum (2 to 5, the paper's x-axis; ``--quick``: 2 and 5) a plan is made (the social
graph placed over the topology's regions, at least 2 and at most that many replicas), then each
protocol runs it on a fresh cluster (``loadtest.workload.run.run_protocol``: seeding, Locust, the
services' metrics). Writes ``fig8.json`` and ``fig8.png`` (two panels, as the paper's 8a) and
prints a table. Fig. 8b, from the same runs: the visibility CDFs of the paper's two pairs,
Ireland→Frankfurt (10 ms, Saturn's best case: the label's path is the link) and Ireland→Tokyo
(107 ms, its worst: the label crosses the whole tree), every maximum's updates together
(``fig8b.png``). With ``--rounds`` above 1 the protocols take turns again at each maximum,
on the same plan, and the table and plots give the median over the rounds (the machine is shared
and noisy); the CDFs pool every round's updates.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtest.harness.comparison import mean, rows_of
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment, Paper
from loadtest.harness.options import positive
from loadtest.harness.plots import colour, plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.harness.stats import Histogram, median_present, to_ms
from loadtest.workload.locust_run import LocustOptions
from loadtest.workload.plan import make_plan
from loadtest.workload.run import run_protocol
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region-m.toml"
PROTOCOLS = ("eventual", "saturn", "gentlerain", "cure")
CDF_PAIRS = (("ireland", "frankfurt"), ("ireland", "tokyo"))  # Fig. 8b: Saturn's best case, its worst


@dataclass
class Point:
    max_replicas: int
    protocol: str
    ops_per_s: float
    throughput_ratio: float | None  # to eventual at the same maximum
    visibility_ms: float | None
    extra_ms: float | None  # over eventual at the same maximum
    failed: int
    pairs: dict[str, dict] = field(default_factory=dict)  # "origin->region": its VisibilityRow, CDF_PAIRS
    round: int = 1  # the ratio and the extra are over the same round's eventual
    first_failures: list[str] = field(default_factory=list)  # Locust's, when ``failed``: what went wrong


def pair_key(origin: str, region: str) -> str:
    return f"{origin}->{region}"


def measure(
    topology: Path,
    maxima: list[int],
    users: int,
    clients: int,
    duration: float,
    out: Path,
    protocols: tuple[str, ...] = PROTOCOLS,
    cdf_pairs: tuple[tuple[str, str], ...] = CDF_PAIRS,
    rounds: int = 1,
) -> list[Point]:
    """Every protocol at every maximum, ``rounds`` times in turn; ``eventual`` must be among
    ``protocols`` (the reference). Each point keeps the visibility histograms of ``cdf_pairs``
    (Fig. 8b)."""
    base = Topology.load(topology)
    options = LocustOptions(user_class="StoreUser", clients=clients, duration=duration)
    points: list[Point] = []
    for i, most in enumerate(maxima, 1):
        plan_dir = out / f"plan-{most}"
        say(f"[{i}/{len(maxima)}] at most {most} replicas: planning {users:,} users over {base.name} ...")
        make_plan(base, plan_dir, users, 1, 2, most)
        for round_ in range(1, rounds + 1):
            if rounds > 1:
                say(f"  round {round_}/{rounds}")
            run_dir = out / (f"max-{most}" if rounds == 1 else f"max-{most}-round-{round_}")
            runs = {p: run_protocol(plan_dir, p, options, run_dir, say) for p in protocols}
            reference = runs["eventual"]
            for protocol, run in runs.items():
                seen, base_seen = run.visibility_mean_ms(), reference.visibility_mean_ms()
                ratio = run.ops_per_s / reference.ops_per_s if reference.ops_per_s else None
                extra = None if seen is None or base_seen is None else seen - base_seen
                pairs = {pair_key(r.origin, r.region): asdict(r) for r in run.visibility
                         if (r.origin, r.region) in cdf_pairs}  # fmt: skip
                points.append(Point(
                    most, protocol, run.ops_per_s, ratio, seen, extra, run.failed, pairs, round_, run.failures
                ))  # fmt: skip
    return points


def medians(points: list[Point]) -> list[Point]:
    """One point per maximum and protocol: the median over the rounds of its throughput and
    visibility, its ratio and extra over eventual's medians (as ``fig5`` does); failures summed."""
    keys = list(dict.fromkeys((p.max_replicas, p.protocol) for p in points))

    def median_of(most: int, protocol: str, what: str) -> float | None:
        return median_present(
            [getattr(p, what) for p in points if (p.max_replicas, p.protocol) == (most, protocol)]
        )

    summary = []
    for most, protocol in keys:
        ops, seen = median_of(most, protocol, "ops_per_s"), median_of(most, protocol, "visibility_ms")
        base_ops, base_seen = (
            median_of(most, "eventual", "ops_per_s"),
            median_of(most, "eventual", "visibility_ms"),
        )
        rounds = [p for p in points if (p.max_replicas, p.protocol) == (most, protocol)]
        summary.append(Point(
            most, protocol, ops or 0.0,
            ops / base_ops if ops is not None and base_ops else None,
            seen, None if seen is None or base_seen is None else seen - base_seen,
            sum(p.failed for p in rounds), first_failures=[f for p in rounds for f in p.first_failures][:5],
        ))  # fmt: skip
    return summary


def pair_histogram(points: list[Point], protocol: str, origin: str, region: str) -> Histogram:
    """One protocol's updates from ``origin`` visible at ``region``, every maximum's together."""
    rows = [
        p.pairs[key]
        for p in points
        if p.protocol == protocol and (key := pair_key(origin, region)) in p.pairs
    ]
    count = sum(r["updates"] for r in rows)
    totals: dict[float, float] = {}
    for r in rows:
        for ms, cumulative in r["cumulative"]:
            totals[ms] = totals.get(ms, 0.0) + cumulative
    return Histogram.of_cumulative_ms(sorted(totals.items()), count)


def p90_ms(points: list[Point], protocol: str, origin: str, region: str) -> float | None:
    return to_ms(pair_histogram(points, protocol, origin, region).quantile(0.9))


def cdf_table(points: list[Point]) -> str:
    protocols = list(dict.fromkeys(p.protocol for p in points))
    rows = []
    for protocol in protocols:
        cells = [protocol]
        for origin, region in CDF_PAIRS:
            histogram = pair_histogram(points, protocol, origin, region)
            p90, base = p90_ms(points, protocol, origin, region), p90_ms(points, "eventual", origin, region)
            extra = None if p90 is None or base is None else p90 - base
            cells += [
                f"{histogram.count:,.0f}",
                num(to_ms(histogram.quantile(0.5))),
                num(p90),
                num(extra, sign=True),
            ]
        rows.append(cells)
    columns = ("updates", "p50", "p90", "p90 extra")
    heads = ["protocol", *(f"{o[:3]}→{r[:3]} {what}" for o, r in CDF_PAIRS for what in columns)]
    return render_table(
        "Fig. 8b: visibility of the paper's two pairs, every maximum together (ms)", heads, rows
    )


def plot_cdfs(points: list[Point], path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (origin, region) in zip(axes, CDF_PAIRS, strict=True):
        for protocol in dict.fromkeys(p.protocol for p in points):
            cdf = pair_histogram(points, protocol, origin, region).cdf_ms()
            ax.step([x for x, _ in cdf], [y for _, y in cdf], where="post", label=protocol,
                    color=colour(protocol))  # fmt: skip
        ax.set_title(f"{origin} → {region}", fontsize=10)
        ax.set_xlabel("remote update visibility (ms)")
        ax.set_xlim(0, 300)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF")
    axes[1].legend(fontsize=8)
    fig.suptitle("Fig. 8b: the Facebook workload, Saturn's best pair and its worst", fontsize=10)
    save(fig, path, dpi=120)


def table(points: list[Point]) -> str:
    rounds = max(p.round for p in points)
    points = medians(points)
    rows = [
        [str(p.max_replicas), p.protocol, f"{p.ops_per_s:,.0f}", num(p.throughput_ratio, digits=3),
         num(p.visibility_ms), num(p.extra_ms, sign=True), str(p.failed)]
        for p in points
    ]  # fmt: skip
    heads = ["max replicas", "protocol", "ops/s", "/ eventual", "visibility ms", "extra ms", "failed"]
    title = "Fig. 8, the Facebook workload" + (f" (median over {rounds} rounds)" if rounds > 1 else "")
    return render_table(title, heads, rows)


def plot(points: list[Point], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    points = medians(points)
    for protocol in dict.fromkeys(p.protocol for p in points):
        mine = [p for p in points if p.protocol == protocol]
        xs = [p.max_replicas for p in mine]
        left.plot(xs, [p.throughput_ratio for p in mine], "o-", label=protocol, color=colour(protocol))
        if protocol != "eventual":
            right.plot(xs, [p.extra_ms for p in mine], "o-", label=protocol, color=colour(protocol))
    left.set_ylabel("throughput / eventual")
    right.set_ylabel("extra visibility over eventual (ms)")
    maxima = sorted({p.max_replicas for p in points})
    for ax in (left, right):
        ax.set_xlabel("maximum replicas of a user's data")
        ax.set_xticks(maxima)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    protocols = ", ".join(dict.fromkeys(p.protocol for p in points))
    fig.suptitle(f"Fig. 8: the Facebook workload ({protocols})", fontsize=10)
    save(fig, path, dpi=120)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=positive(int), default=20, help="Locust users (default: 20)")


def run(args: argparse.Namespace) -> int:
    protocols = tuple(args.protocols)
    if protocols[0] != "eventual":
        raise BenchError(f"--protocols must start with eventual (the reference), got {','.join(protocols)}")
    maxima = [2, 5] if args.quick else [2, 3, 4, 5]
    users, duration = (500, 8.0) if args.quick else (2000, 30.0)
    out = Path(args.out)
    points = measure(
        Path(args.topology), maxima, users, args.clients, duration, out, protocols, rounds=args.rounds
    )
    publish(out, "fig8", points, f"{table(points)}\n\n{cdf_table(points)}", lambda path: plot(points, path))
    plot_cdfs(points, out / "fig8b.png")
    say(f"wrote {out / 'fig8b.png'}")
    for point in medians(points):
        if point.failed:
            say(f"[{point.protocol}] at most {point.max_replicas} replicas: {point.failed} failed requests, "
                f"the first: {'; '.join(point.first_failures)}")  # fmt: skip
    return FAILED if any(p.failed for p in points) else PASSED


# -- the paper's Fig. 8 beside this run (python -m loadtest paper fig8) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    rows = [Point(**row) for row in rows_of(out / "fig8.json")]
    summary = medians(rows)

    def mean_of(protocol: str, field: str) -> float | None:
        values = [
            getattr(p, field) for p in summary if p.protocol == protocol and getattr(p, field) is not None
        ]
        return mean(values) if values else None

    def over(mine: float | None, theirs: float | None) -> float | None:
        return mine / theirs if mine is not None and theirs else None

    ratio = {p: mean_of(p, "throughput_ratio") for p in ("saturn", "gentlerain", "cure")}
    extra = {p: mean_of(p, "extra_ms") for p in ("saturn", "gentlerain", "cure")}
    table = [
        ["Saturn throughput / eventual, mean over maxima", "0.982", num(ratio["saturn"], digits=3)],
        [
            "Saturn / GentleRain throughput",
            "1.109",
            num(over(ratio["saturn"], ratio["gentlerain"]), digits=3),
        ],
        ["Saturn / Cure throughput", "1.419", num(over(ratio["saturn"], ratio["cure"]), digits=3)],
        ["Saturn extra visibility (ms)", "16.1", num(extra["saturn"], sign=True)],
        ["Cure extra visibility (ms)", "23.7", num(extra["cure"], sign=True)],
        ["GentleRain extra visibility (ms)", "79.2", num(extra["gentlerain"], sign=True)],
    ]
    p90 = {(p, r): p90_ms(rows, p, "ireland", r) for p in PROTOCOLS for r in ("frankfurt", "tokyo")}

    def p90_over(protocol: str, other: str, region: str) -> str:
        mine, theirs = p90[protocol, region], p90[other, region]
        return num(None if mine is None or theirs is None else mine - theirs, sign=True)

    table += [
        [
            f"8b: Saturn p90 over {name}'s, Ireland→{region.title()} (ms)",
            paper,
            p90_over("saturn", other, region),
        ]
        for name, other, region, paper in (
            ("eventual", "eventual", "frankfurt", "+8.7"),
            ("eventual", "eventual", "tokyo", "+47.2"),
            ("GentleRain", "gentlerain", "tokyo", "+0.9"),
            ("Cure", "cure", "tokyo", "+9.9"),
        )
    ]
    if None in ratio.values() or None in extra.values():
        verdict = (
            "Not every protocol ran (--protocols): the baselines' comparisons are left out. Every region "
        )
    else:
        saturn, gentlerain, cure = ratio["saturn"], ratio["gentlerain"], ratio["cure"]
        seen = (extra["saturn"], extra["cure"], extra["gentlerain"])
        faster = (
            saturn is not None
            and gentlerain is not None
            and cure is not None
            and saturn > max(gentlerain, cure)
        )
        ordered = None not in seen and seen == tuple(sorted(seen))  # type: ignore[type-var]
        verdict = (
            f"Saturn's throughput is {'above' if faster else 'not above'} both baselines' and the visibility "
            f"order Saturn < Cure < GentleRain {'holds' if ordered else 'does not hold'}. Every region "
        )
    verdict += (
        "shares two cores, so the baselines' heartbeats (every shipping gear, always) take CPU from the "
        "whole system, not from their region alone as on the paper's testbed."
    )
    return table, verdict


EXPERIMENT = Experiment(
    name="fig8",
    summary="Saturn Fig. 8: the Facebook workload per protocol and most replicas (8a), two pairs' CDFs (8b)",
    minutes=(4.0, 25.0),
    run=run,
    arguments=arguments,
    shared={
        "topology": TOPOLOGY,
        "protocols": PROTOCOLS,
        "rounds": 1,
        "quick": "maxima 2 and 5, 500 users, 8 s per run",
        "out": None,
    },
    paper=Paper(compare),
    about=__doc__ or "",
)
