"""Where a region's label sink runs: ``python -m loadtest bench sink-placement [--rounds N] --out DIR``.

Saturn on ec2-7region-mx under Fig. 5's workload (``measure_protocol``) at the defaults and
at 50:50, once with the sink in a process of its own and once in the bulk sender's
(``[saturn] sink_in_bulk_sender``), the two taking turns round by round (the machine is shared
and noisy). Prints, per round and as medians, throughput and the CPU per operation of the sink
and the sender together and of the whole cluster; writes ``sink_placement.json``.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from loadtest.bench.synthetic_family import TOPOLOGY, Mix, Settings, measure_protocol, write_topology
from loadtest.harness.cluster import with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.report import num, render_table, say, write_rows
from services.topology import Topology

MIXES = (Mix(), Mix(read_fraction=0.5))
SHIPPING = ("label-sink", "bulk-sender")  # the roles the setting merges


@dataclass
class Row:
    together: bool  # the sink in the bulk sender's process
    round: int
    point: str
    ops_per_s: float
    shipping_cpu_us_per_op: float  # sink and sender together
    cpu_us_per_op: float | None  # the whole cluster's


def measure(rounds: int, settings: Settings, out: Path) -> list[Row]:
    base = Topology.load(TOPOLOGY)
    files = {
        together: write_topology(
            with_overrides(base, saturn={**base.saturn.model_dump(), "sink_in_bulk_sender": together}),
            out / f"topology-{'together' if together else 'apart'}.toml",
        )
        for together in (False, True)
    }
    rows = []
    for round_ in range(1, rounds + 1):
        for together in (False, True) if round_ % 2 else (True, False):
            run = out / f"run-{'together' if together else 'apart'}-{round_}"
            for p in measure_protocol("saturn", files[together], list(MIXES), settings, run, round_):
                shipping = sum(p.cpu_us_by_role.get(role, 0.0) for role in SHIPPING)
                rows.append(Row(together, round_, p.mix.name, p.ops_per_s, shipping, p.cpu_us_per_op))
    return rows


def table(rows: list[Row]) -> str:
    lines = []
    for point in dict.fromkeys(r.point for r in rows):
        for together in (False, True):
            mine = [r for r in rows if r.point == point and r.together == together]
            lines.append([
                point, "together" if together else "apart",
                num(statistics.median(r.ops_per_s for r in mine), 0),
                num(statistics.median(r.shipping_cpu_us_per_op for r in mine), 0),
                num(statistics.median(r.cpu_us_per_op or 0.0 for r in mine), 0),
            ])  # fmt: skip
    heads = ["point", "sink", "ops/s", "sink + sender µs CPU/op", "cluster µs CPU/op"]
    return render_table("Where the label sink runs (medians over rounds)", heads, lines)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=positive(float), default=10.0, help="per point (default 10)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say(f"sink placement: {args.rounds} round(s) x 2 placements x {len(MIXES)} points of {args.seconds:g} s")
    rows = measure(args.rounds, Settings(2, 2.0, args.seconds), out)
    for r in rows:
        where = "together" if r.together else "apart"
        cost = f"sink + sender {r.shipping_cpu_us_per_op:.0f} µs/op, cluster {num(r.cpu_us_per_op, 0)} µs/op"
        say(f"round {r.round} {where} {r.point}: {r.ops_per_s:,.0f} ops/s, {cost}")
    print(table(rows))
    write_rows(str(out), "sink_placement", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="sink-placement",
    summary="the label sink in a process of its own or in the bulk sender's: throughput and CPU per op",
    minutes=(9.0, 9.0),  # no short version: 6 clusters of ec2-7region-mx, 2 points of 10 s each
    run=run,
    arguments=arguments,
    shared={"rounds": 3, "out": None},
    about=__doc__ or "",
)
