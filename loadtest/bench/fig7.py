"""The paper's Fig. 7 on ec2-7region: ``python -m loadtest bench fig7 [--quick] [--out DIR]``.

Remote-update visibility of the four protocols on one data path: ``eventual`` (the optimum:
visible when the bulk link brings it), ``saturn``, ``gentlerain`` (global stable time) and
``cure`` (global stable vector). The CDFs are the paper's two pairs: Ireland→Frankfurt, where
Saturn's tree path is the link itself (its best case), and Ireland→Sydney, where it is longest
(its worst).

By default (``--load workload``) it runs as the paper ran it (§7.3.1): the synthetic workload at
its defaults (exponential correlation, 90:10, 2-byte values; ``synthetic.py``), on the tree
generated for that workload's traffic (ec2-7region-mx.toml), each protocol on a fresh cluster
first driven to its own capacity by closed-loop clients, then measured with the same clients
paced to ``--share`` of it (the paper: "as many clients as reach the system's capacity without
overloading it"). Every remote update counts, so the mean over updates weighs the pairs that
share much data much, as the paper's does; the mean over pairs is printed beside it. Regions
have ``--shards`` partitions (default 2): with one, GentleRain's and Cure's stabilization has
nothing to aggregate inside a region and costs less than in any real deployment (the paper ran
it every 5 ms, as here: the topology's ``[stabilization] period_s``).

``--load probes`` is the earlier form: paced probe writes (``--rate`` a second per region) to an
all-replicated group, on the equal-weights tree (ec2-7region-m.toml).
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.bench import visibility_family
from loadtest.bench.synthetic_family import Buckets, Mix, client_op, preload_replicated, write_topology
from loadtest.bench.visibility_family import TOPOLOGIES, Configuration, Figure, PairRow
from loadtest.harness import budget, metrics
from loadtest.harness.cluster import clients_at_sites, find_base_port, started, with_overrides, with_shards
from loadtest.harness.comparison import (
    extra_by_configuration,
    pair,
    rows_of,
)
from loadtest.harness.cpu import CpuMeter, by_role, used_between
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment, Paper
from loadtest.harness.loop import paced, run_closed_loop
from loadtest.harness.options import positive
from loadtest.harness.plots import PROTOCOL_COLOURS
from loadtest.harness.report import cpu_role_table, num, render_table, say, write_rows
from services.topology import Topology

PROTOCOLS = ("eventual", "saturn", "gentlerain", "cure")
PROBE_TREE = "ec2-7region-m.toml"  # the tree for equal weights
WORKLOAD_TREE = "ec2-7region-mx.toml"  # the tree generated for the workload's traffic
PAIRS = [("ireland", "frankfurt"), ("ireland", "sydney")]
FIGURE = Figure(
    name="fig7",
    title="Fig. 7, ec2-7region",
    configurations=[Configuration(p, PROBE_TREE, p) for p in PROTOCOLS],
    pairs=PAIRS,
    colours=PROTOCOL_COLOURS,
)
PROBES = visibility_family.experiment(FIGURE, "", minutes=(1.5, 2.5), about="")


@dataclass
class Load:
    """What one protocol's cluster took: its capacity and the load it was measured under."""

    protocol: str
    shards: int
    clients: int  # closed-loop clients, over all regions
    capacity_ops_per_s: float
    offered_ops_per_s: float  # --share of the capacity, spread over the clients
    measured_ops_per_s: float
    errors: int
    first_error: str | None
    #: at capacity: the cluster's CPU per operation by role (the clients' own apart), µs
    cpu_us_by_role: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Phases:
    warmup: float
    capacity: float  # seconds the closed loop runs to find the capacity
    measured: float  # seconds the paced clients are measured


def measure_at_load(
    protocol: str, topology_file: Path, clients_per_region: int, share: float, phases: Phases, run_dir: Path
) -> tuple[Load, list[PairRow], list[budget.Budget]]:
    """One fresh cluster of ``protocol``: preloaded, driven to capacity, then measured at
    ``share`` of it: the load, the visibility of every pair, and its budget."""
    topology = with_overrides(Topology.load(topology_file), protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    buckets, mix = Buckets(topology), Mix()
    with started(topology, run_dir) as cluster, clients_at_sites(cluster.topology) as clients:
        running = cluster.topology
        preload_replicated(protocol, running, clients, buckets, mix.value_bytes)

        def client_ops(seed: int) -> list:
            return [
                client_op(clients[region], region, buckets, mix, seed=seed + 1000 * r + c)
                for r, region in enumerate(running.region_names)
                for c in range(clients_per_region)
            ]

        meter = CpuMeter({name: r.popen.pid for name, r in cluster.processes.items()})
        cpu_at: dict[str, dict] = {}
        flat_out = run_closed_loop(
            client_ops(0),
            phases.warmup,
            phases.capacity,
            lambda edge: cpu_at.update({edge: meter.snapshot()}),
        )
        done = sum(len(s.latencies) for s in flat_out)
        capacity = done / phases.capacity
        cpu = by_role(used_between(cpu_at["open"], cpu_at["close"]))
        ops = client_ops(500)
        per_client = share * capacity / len(ops)
        say(
            f"[{protocol}]   capacity {capacity:,.0f} ops/s with {len(ops)} closed-loop clients; "
            f"measuring at {share:.0%} of it ({per_client:.1f} ops/s a client) ..."
        )
        rng = random.Random(7)
        # Read before the clients start and after they stop, not at the window's edges: a scrape
        # costs each region's metrics process a good part of a second under Saturn, and taken
        # inside the window it queued the paced load behind it (fig5.py says more).
        before = metrics.pages(running)
        stats = run_closed_loop([paced(op, per_client, rng) for op in ops], phases.warmup, phases.measured)
        after = metrics.pages(running)
        errors = [s.first_error for s in stats if s.first_error]
        load = Load(
            protocol=protocol,
            shards=running.region(running.region_names[0]).shards,
            clients=len(ops),
            capacity_ops_per_s=capacity,
            offered_ops_per_s=share * capacity,
            measured_ops_per_s=sum(len(s.latencies) for s in stats) / phases.measured,
            errors=sum(s.errors for s in (*flat_out, *stats)),
            first_error=errors[0] if errors else None,
            cpu_us_by_role={role: 1e6 * seconds / done for role, seconds in cpu.items()} if done else {},
        )
        seen_then, seen_now = (metrics.parsed(texts, metrics.parse_visibility) for texts in (before, after))
        stages_then, stages_now = (metrics.parsed(texts, budget.parse_stages) for texts in (before, after))
        rows = visibility_family.rows_for(protocol, running, seen_now, seen_then)
        return load, rows, budget.budgets(running, budget.since(stages_now, stages_then))


LOAD_COLUMNS = ["protocol", "shards", "clients", "capacity ops/s", "offered ops/s", "measured ops/s"]
LOAD_COLUMNS += ["kept", "errors"]


def load_table(loads: list[Load]) -> str:
    rows = [
        [
            x.protocol,
            str(x.shards),
            str(x.clients),
            num(x.capacity_ops_per_s, 0),
            num(x.offered_ops_per_s, 0),
            num(x.measured_ops_per_s, 0),
            f"{x.measured_ops_per_s / x.offered_ops_per_s:.0%}" if x.offered_ops_per_s else "-",
            str(x.errors),
        ]
        for x in loads
    ]
    return render_table(
        "the load: each protocol's capacity, and what it was measured under (kept: the share of the "
        "offered rate the paced clients achieved; below ~90 % they fell behind, the cores were saturated)",
        LOAD_COLUMNS,
        rows,
    )


def cpu_table(loads: list[Load]) -> str:
    return cpu_role_table(
        "CPU µs per operation at capacity, by role", [(x.protocol, x.cpu_us_by_role) for x in loads]
    )


def arguments(parser: argparse.ArgumentParser) -> None:
    PROBES.arguments(parser)  # --rate, --only
    parser.add_argument(
        "--load",
        choices=("workload", "probes"),
        default="workload",
        help="the synthetic workload at a share of capacity, as the paper (default), or probe writes",
    )
    parser.add_argument(
        "--clients", type=positive(int), default=2, help="closed-loop clients per region (default: 2)"
    )
    parser.add_argument(
        "--share", type=positive(float), default=0.85, help="of each protocol's capacity (default: 0.85)"
    )
    parser.add_argument("--shards", type=positive(int), default=2, help="partitions per region (default: 2)")


def run(args: argparse.Namespace) -> int:
    if args.load == "probes":
        return PROBES.run(args)
    if not 0 < args.share <= 1:
        raise BenchError(f"--share is a fraction of capacity, in (0, 1]; got {args.share}")
    only = args.only.split(",") if args.only else list(PROTOCOLS)
    if unknown := set(only) - set(PROTOCOLS):
        raise BenchError(f"no protocol {', '.join(sorted(unknown))} (known: {', '.join(PROTOCOLS)})")
    phases = Phases(1.0, 3.0, 5.0) if args.quick else Phases(2.0, 8.0, 15.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = with_shards(Topology.load(TOPOLOGIES / WORKLOAD_TREE), args.shards)
    topology_file = write_topology(base, out / "topology.toml")
    loads: list[Load] = []
    rows: list[PairRow] = []
    budgets: list[budget.Budget] = []
    for i, protocol in enumerate(p for p in PROTOCOLS if p in only):
        say(f"[{i + 1}/{len(only)}] {protocol}: the synthetic workload's defaults on {WORKLOAD_TREE} ...")
        load, measured, spent = measure_at_load(
            protocol, topology_file, args.clients, args.share, phases, out / f"run-{protocol}"
        )
        loads.append(load)
        rows += measured
        budgets += spent
    print(load_table(loads))
    print()
    print(cpu_table(loads))
    print()
    print(visibility_family.summary_table(FIGURE, rows))
    print()
    print(visibility_family.per_pair(rows))
    print()
    print(budget.summary(budgets))
    saturn = [b for b in budgets if b.protocol == "saturn"]
    if saturn:
        print()
        print(budget.table("saturn", saturn, [b for b in budgets if b.protocol == "eventual"]))
    write_rows(str(out), "fig7", rows)
    write_rows(str(out), "fig7-load", loads)
    write_rows(str(out), "fig7-budget", budgets)
    for path in visibility_family.plot(FIGURE, rows, out):
        say(f"wrote {path}")
    if saturn:
        say(f"wrote {budget.plot('saturn', saturn, out / 'fig7-budget.png')}")
    return FAILED if any(x.errors for x in loads) else PASSED


# -- the paper's Fig. 7 beside this run (python -m loadtest paper fig7) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    rows = rows_of(out / "fig7.json")
    by_configuration: dict[str, list[PairRow]] = {}
    for row in rows:
        by_configuration.setdefault(row["configuration"], []).append(PairRow(**row))
    over_updates = {
        name: value
        for name, mine in by_configuration.items()
        if (value := visibility_family.extra_over_updates(mine)) is not None
    }
    over_pairs = extra_by_configuration(rows)
    extra = {name: value - over_updates["eventual"] for name, value in over_updates.items()}
    per_pair = {name: value - over_pairs["eventual"] for name, value in over_pairs.items()}

    def p90_over(protocol: str, origin: str, region: str) -> float | None:
        """None where a pair made no update visible (under the workload a far pair ships few)."""
        mine, base = (pair(rows, p, origin, region)["p90_ms"] for p in (protocol, "eventual"))
        return None if mine is None or base is None else mine - base

    load = out / "fig7-load.json"
    how = (
        "the synthetic workload at "
        + ", ".join(f"{r['protocol']} {r['offered_ops_per_s']:,.0f}" for r in rows_of(load))
        + " ops/s"
        if load.exists()
        else "probe writes"
    )
    ratio = num(extra["saturn"] / extra["cure"], digits=2) if extra["cure"] else "-"
    table = [
        ["Saturn extra over eventual, mean over updates (ms)", "7.3", num(extra["saturn"], sign=True)],
        ["Cure extra (ms)", "21.3", num(extra["cure"], sign=True)],
        ["GentleRain extra (ms)", "97.9", num(extra["gentlerain"], sign=True)],
        ["Saturn / Cure extra", "0.34", ratio],
        [
            "mean over pairs instead, Saturn / Cure / GentleRain (ms)",
            "-",
            " / ".join(num(per_pair[p], sign=True) for p in ("saturn", "cure", "gentlerain")),
        ],
        *(
            [
                f"Saturn p90 extra, Ireland→{region.title()} (ms)",
                paper,
                num(p90_over("saturn", "ireland", region), sign=True),
            ]
            for region, paper in (("frankfurt", "7"), ("sydney", "20.4"))
        ),
    ]
    ordered = extra["saturn"] < extra["cure"] < extra["gentlerain"]
    tenfold = extra["gentlerain"] >= 10 * max(extra["saturn"], 0.1)
    verdict = (
        f"Under {how}: the order Saturn < Cure < GentleRain {'holds' if ordered else 'does not hold'} "
        f"({num(extra['saturn'])} / {num(extra['cure'])} / {num(extra['gentlerain'])} ms over updates); "
        f"GentleRain is {'at least' if tenfold else 'less than'} 10 times Saturn's. GentleRain waits for "
        "the farthest region that ships here (its stable time is one scalar), Cure only for the regions "
        "an update depends on, Saturn for its label's path through the tree."
    )
    return table, verdict


EXPERIMENT = Experiment(
    name="fig7",
    summary="Saturn Fig. 7: visibility of eventual, Saturn, GentleRain and Cure on ec2-7region",
    minutes=(3.5, 5.0),
    run=run,
    arguments=arguments,
    shared={"quick": "shorter phases (3 s at capacity, 5 s measured)", "out": "bench-results/fig7"},
    paper=Paper(compare),
    about=__doc__ or "",
)
