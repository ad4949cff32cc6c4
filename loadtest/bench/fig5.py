"""The paper's Fig. 5 on ec2-7region: ``python -m loadtest bench fig5 [--quick] --out DIR``.

Throughput of ``eventual``, ``saturn``, ``gentlerain`` and ``cure`` under the synthetic workload
(``synthetic.py``), normalised to ``eventual`` at the same point, sweeping one parameter at a time
from the paper's defaults (2-byte values, 90:10 reads:writes, exponential correlation, no remote
reads): (a) value size 8 to 2048 bytes, (b) reads:writes 50:50 to 99:1, (c) correlation
exponential, proportional, uniform, full, (d) remote reads 0 to 40 % of the reads. Beside it,
from the same runs: the mean remote-update visibility over the bulk link's latency (each region's
``causal_visibility_seconds``) and the CPU the cluster spent per operation.

Each protocol runs every point on one cluster of its own (the workload's parameters are the
clients' alone), started on ec2-7region-mx.toml (the tree generated for the workload's traffic
at the defaults) plus one group per bucket: ``--clients`` closed-loop
clients per region, each with its own session, a client per region at that region's site (calls to
another region cross the emulated WAN). With ``--rounds`` above 1 the protocols take turns again
and each figure is the median over the rounds (the machine is shared and noisy). Writes
``fig5.json`` (every point of every round) and ``fig5.png``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from loadtest.bench.synthetic_family import (
    CORRELATIONS,
    TOPOLOGY,
    Mix,
    Point,
    Settings,
    measure_protocol,
    write_topology,
)
from loadtest.harness.comparison import mean, rows_of
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment, Paper
from loadtest.harness.options import positive
from loadtest.harness.plots import colour, plt, save
from loadtest.harness.report import cpu_role_table, num, publish, render_table, say
from loadtest.harness.stats import median_present
from services.topology import Topology

# The tree the generator makes for this workload's traffic at the defaults (exponential
# correlation): half the label lag of the equal-weights tree for it (docs/MEASUREMENTS.md).
PROTOCOLS = ("eventual", "saturn", "gentlerain", "cure")
DEFAULT = Mix()


@dataclass(frozen=True)
class Sweep:
    key: str  # the Mix field it varies
    title: str
    values: tuple
    quick: tuple  # the values --quick keeps

    def mixes(self, quick: bool) -> list[Mix]:
        return [replace(DEFAULT, **{self.key: v}) for v in (self.quick if quick else self.values)]


SWEEPS = (
    Sweep("value_bytes", "(a) value size (bytes)", (8, 32, 128, 512, 2048), (8, 2048)),
    Sweep("read_fraction", "(b) reads in the mix", (0.5, 0.75, 0.9, 0.99), (0.5, 0.99)),
    Sweep("correlation", "(c) correlation", CORRELATIONS, ("exponential", "full")),
    Sweep("remote_read_fraction", "(d) remote reads (of the reads)", (0.0, 0.05, 0.1, 0.2, 0.4), (0.4,)),
)


def points_of(quick: bool) -> list[Mix]:
    """The defaults and every sweep's points, once each, by value size (a preload per size)."""
    mixes = dict.fromkeys([DEFAULT, *(m for s in SWEEPS for m in s.mixes(quick))])
    return sorted(mixes, key=lambda m: m.value_bytes)


def figure(
    points: list[Point], protocol: str, mix: Mix, what: Callable[[Point], float | None]
) -> float | None:
    """The median over the rounds of one figure of one protocol at one point."""
    return median_present([what(p) for p in points if p.protocol == protocol and p.mix == mix])


def ratio(points: list[Point], protocol: str, mix: Mix, base: str = "eventual") -> float | None:
    """Throughput of ``protocol`` over ``base``'s at the same point."""
    mine, theirs = (figure(points, p, mix, lambda x: x.ops_per_s) for p in (protocol, base))
    return mine / theirs if mine is not None and theirs else None


def extra_over_eventual(points: list[Point], protocol: str, mix: Mix = DEFAULT) -> float | None:
    mine, base = (figure(points, p, mix, lambda x: x.over_bulk_ms) for p in (protocol, "eventual"))
    return None if mine is None or base is None else mine - base


def protocols_in(points: list[Point]) -> list[str]:
    return list(dict.fromkeys(p.protocol for p in points))


def sweep_values(points: list[Point], sweep: Sweep) -> list:
    """The sweep's values that were measured, in the sweep's order."""
    mixes = {p.mix for p in points}
    return [v for v in sweep.values if replace(DEFAULT, **{sweep.key: v}) in mixes]


def table(points: list[Point]) -> str:
    protocols = protocols_in(points)
    rows = []
    for sweep in SWEEPS:
        for value in sweep_values(points, sweep):
            mix = replace(DEFAULT, **{sweep.key: value})
            base = figure(points, "eventual", mix, lambda x: x.ops_per_s)
            rows.append([f"{sweep.title[:3]} {mix.name}", num(base, 0)] + [
                num(ratio(points, p, mix), digits=3) for p in protocols if p != "eventual"
            ])  # fmt: skip
    others = [p for p in protocols if p != "eventual"]
    heads = ["point", "eventual ops/s", *(f"{p} / eventual" for p in others)]
    lines = [render_table("Fig. 5: throughput normalised to eventual (median over rounds)", heads, rows), ""]
    lines.append(
        render_table(
            f"at the defaults ({DEFAULT.name})",
            [
                "protocol",
                "ops/s",
                "visibility over bulk ms",
                "extra over eventual ms",
                "CPU µs/op",
                "without serializers",
            ],
            [
                [
                    p,
                    num(figure(points, p, DEFAULT, lambda x: x.ops_per_s), 0),
                    num(figure(points, p, DEFAULT, lambda x: x.over_bulk_ms)),
                    num(extra_over_eventual(points, p), sign=True),
                    num(figure(points, p, DEFAULT, lambda x: x.cpu_us_per_op), 0),
                    num(figure(points, p, DEFAULT, lambda x: x.regions_cpu_us_per_op), 0),
                ]
                for p in protocols
            ],
        )
    )
    lines += ["", cpu_role_table("CPU µs per operation at the defaults, by role, median over rounds", [
        (p, role_medians([x.cpu_us_by_role for x in points if x.protocol == p and x.mix == DEFAULT]))
        for p in protocols
    ])]  # fmt: skip
    return "\n".join(lines)


def role_medians(by_round: list[dict[str, float]]) -> dict[str, float]:
    """Each role's median over the rounds that measured it."""
    roles = {r for cpu in by_round for r in cpu}
    return {r: statistics.median(cpu[r] for cpu in by_round if r in cpu) for r in roles}


def plot(points: list[Point], path: Path) -> None:
    protocols = protocols_in(points)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, sweep in zip(axes.flat, SWEEPS, strict=False):
        values = sweep_values(points, sweep)
        xs = list(range(len(values)))
        for protocol in protocols:
            ys = [ratio(points, protocol, replace(DEFAULT, **{sweep.key: v})) for v in values]
            ax.plot(xs, ys, "o-", label=protocol, color=colour(protocol))
        labels = [_label(sweep, v) for v in values]
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_title(sweep.title, fontsize=10)
        ax.set_ylabel("throughput / eventual")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    others = [p for p in protocols if p != "eventual"]
    bars = axes.flat[4]
    bars.bar(
        others,
        [extra_over_eventual(points, p) or 0 for p in others],
        color=[colour(p) for p in others],
    )
    bars.set_title("(e) extra visibility over eventual, defaults", fontsize=10)
    bars.set_ylabel("ms")
    cpu = axes.flat[5]
    cpu.bar(
        protocols,
        [figure(points, p, DEFAULT, lambda x: x.cpu_us_per_op) or 0 for p in protocols],
        color=[colour(p) for p in protocols],
    )
    cpu.set_title("(f) cluster CPU per operation, defaults", fontsize=10)
    cpu.set_ylabel("µs")
    fig.suptitle("Fig. 5: the synthetic workload on ec2-7region (this machine)", fontsize=11)
    save(fig, path, dpi=120)


def _label(sweep: Sweep, value: object) -> str:
    if sweep.key == "read_fraction":
        reads = round(100 * float(value))  # type: ignore[arg-type]
        return f"{reads}:{100 - reads}"
    if sweep.key == "remote_read_fraction":
        return f"{round(100 * float(value))} %"  # type: ignore[arg-type]
    return str(value)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--clients", type=positive(int), default=2, help="closed-loop clients per region (default: 2)"
    )
    parser.add_argument(
        "--client-processes",
        type=positive(int),
        default=1,
        help="spread the clients over this many processes (default: 1; on many cores one process "
        "of clients is the ceiling, not the cluster)",
    )


def run(args: argparse.Namespace) -> int:
    protocols = args.protocols
    if protocols[0] != "eventual":
        raise BenchError(f"--protocols must start with eventual (the reference), got {','.join(protocols)}")
    settings = Settings(args.clients, *((1.0, 3.0) if args.quick else (2.0, 10.0)), args.client_processes)
    mixes = points_of(args.quick)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    topology_file = write_topology(Topology.load(args.topology), out / "topology.toml")
    per_point = settings.warmup + settings.duration + 1.0
    minutes = args.rounds * len(protocols) * (len(mixes) * per_point + 60) / 60
    say(
        f"Fig. 5: {len(mixes)} points x {len(protocols)} protocols x {args.rounds} round(s), "
        f"{args.clients} clients per region in {args.client_processes} process(es), "
        f"{settings.duration:g} s a point: about {minutes:.0f} minutes"
    )
    points: list[Point] = []
    for round_ in range(1, args.rounds + 1):
        for protocol in protocols:
            say(f"== round {round_}/{args.rounds}: {protocol}")
            run_dir = out / f"run-{protocol}-{round_}"
            points += measure_protocol(protocol, topology_file, mixes, settings, run_dir, round_)
    publish(out, "fig5", points, table(points), lambda path: plot(points, path))
    return FAILED if any(p.errors for p in points) else PASSED


# -- the paper's Fig. 5 beside this run (python -m loadtest paper fig5) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    points = [Point(**row) for row in rows_of(out / "fig5.json")]
    mixes = sorted({p.mix for p in points}, key=lambda m: m.name)

    def over(protocol: str, other: str, among: list | None = None) -> float:
        """Saturn's throughput over ``other``'s, averaged over the points measured."""
        ratios = [ratio(points, protocol, m, base=other) for m in (among or mixes)]
        return mean([r for r in ratios if r is not None])

    full = [m for m in mixes if m.correlation == "full"]
    remote = [m for m in mixes if m.remote_read_fraction == 0.4]
    defaults = [DEFAULT]
    extra = {p: extra_over_eventual(points, p) for p in ("saturn", "cure", "gentlerain")}

    def ratio_row(what: str, paper: str, other: str, among: list | None = None) -> list[str]:
        measured = among is None or bool(among)
        return [what, paper, num(over("saturn", other, among), digits=3) if measured else "not measured"]

    table = [
        ratio_row("Saturn / eventual throughput, mean of the points", "0.978", "eventual"),
        ratio_row("Saturn / GentleRain, mean of the points", "1.048", "gentlerain"),
        ratio_row("Saturn / Cure, mean of the points", "1.247", "cure"),
        ratio_row("Saturn / Cure, full replication", "1.152", "cure", full),
        ratio_row("Saturn / GentleRain at 40 % remote reads", "1.157", "gentlerain", remote),
        ratio_row("Saturn / Cure at 40 % remote reads", "1.605", "cure", remote),
        ratio_row("Saturn / GentleRain at the defaults (target ≥ 1.05)", "-", "gentlerain", defaults),
        ratio_row("Saturn / Cure at the defaults (target ≥ 1.25)", "-", "cure", defaults),
        *(
            [
                f"Saturn over eventual / GentleRain / Cure, mean of sweep {sweep.title}",
                "-",
                " / ".join(
                    num(over("saturn", other, among), digits=3)
                    for other in ("eventual", "gentlerain", "cure")
                ),
            ]
            for sweep in SWEEPS
            if (among := [m for m in mixes if replace(DEFAULT, **{sweep.key: getattr(m, sweep.key)}) == m])
        ),
        [
            "extra visibility at the defaults, Saturn / Cure / GentleRain (ms)",
            "7.3 / 21.3 / 97.9 (Fig. 7)",
            " / ".join(num(extra[p], sign=True) for p in ("saturn", "cure", "gentlerain")),
        ],
    ]

    def cpu_bound(other: str) -> float | None:
        """The throughput ratio if CPU per operation alone set it, serializers on machines of
        their own (as on the paper's testbed): an estimate, not a measurement."""
        mine, theirs = (
            figure(points, p, DEFAULT, lambda x: x.regions_cpu_us_per_op) for p in ("saturn", other)
        )
        return theirs / mine if mine and theirs else None

    table += [
        [
            f"estimate, serializers on their own machines: Saturn / {name}",
            "-",
            num(cpu_bound(other), digits=3),
        ]
        for name, other in (("GentleRain", "gentlerain"), ("Cure", "cure"))
    ]
    at_defaults = over("saturn", "gentlerain", defaults), over("saturn", "cure", defaults)

    def by_role(protocol: str, roles: tuple[str, ...]) -> float:
        cost = figure(points, protocol, DEFAULT, lambda p: sum(p.cpu_us_by_role.get(r, 0.0) for r in roles))
        return float("nan") if cost is None else cost

    # the sink runs in the bulk sender's process by default: the label path is what Saturn's
    # sinks, senders and serializers cost over eventual's senders
    label_path = by_role("saturn", ("label-sink", "bulk-sender", "serializer")) - by_role(
        "eventual", ("bulk-sender",)
    )
    bulk = ("bulk-sender", "bulk-receiver")
    heartbeats = by_role("gentlerain", bulk) - by_role("eventual", bulk)
    met = at_defaults[0] >= 1.05 and at_defaults[1] >= 1.25
    verdict = (
        f"Targets at the defaults {'met' if met else 'not met'} (Saturn {num(at_defaults[0], digits=3)} "
        f"times GentleRain's throughput, {num(at_defaults[1], digits=3)} times Cure's). Every region "
        "shares this machine's cores: "
        "a protocol's throughput here is set by the CPU its whole path costs per operation (the "
        "table's CPU µs/op), serializers and other regions included, where on the paper's testbed "
        "each datacenter and each serializer had machines of its own (the estimate rows: the inverse "
        "of the CPU per operation without the serializers'). At the defaults Saturn's label path "
        f"(sink and serializers) costs {num(label_path, 0)} µs of CPU per operation, GentleRain's "
        f"heartbeats and stabilization (its bulk processes over eventual's) {num(heartbeats, 0)}; the "
        "visibility row is measured under saturation, so it carries queueing the paced Fig. 7 runs do not."
    )
    return table, verdict


EXPERIMENT = Experiment(
    name="fig5",
    summary="Saturn Fig. 5: the synthetic workload's throughput against eventual, one parameter at a time",
    minutes=(6.0, 15.0),
    run=run,
    arguments=arguments,
    shared={
        "topology": TOPOLOGY, "protocols": PROTOCOLS, "rounds": 1,
        "quick": "the sweeps' end points only, 3 s a point", "out": None,
    },
    paper=Paper(compare),
    about=__doc__ or "",
)  # fmt: skip
