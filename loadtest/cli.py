"""``python -m loadtest``: the Facebook-derived load test.

    python -m loadtest run --users 2000 --duration 60                 # eventual and saturn, store target
    python -m loadtest run --target web --clients 20 --duration 60    # against the web apps
    python -m loadtest plan --users 2000 --out my-plan                 # graph + placement + topology
    python -m loadtest run --plan my-plan --running .run               # a cluster started by hand
    python -m loadtest graph --users 61096 --out nola.txt.gz           # the full-size graph
    python -m loadtest check --duration 60 --nemesis all               # random histories under faults
    python -m loadtest soak --ops 1000000                              # every protocol, kind and fault
    python -m loadtest paper fig7 --quick                              # a figure of the Saturn paper
    python -m loadtest bench --list                                    # every experiment, its minutes
    python -m loadtest bench fig4 --quick --out results/fig4           # one experiment
    python -m loadtest plot bench-results/demo-3region.json            # redraw a saved run

``run`` makes a plan (unless given one), then per protocol starts the plan's topology on free
ports (with the web tier for ``--target web``), seeds the network, runs Locust headless, reads the
services' metrics, and stops everything; it prints tables and writes Locust's CSV/JSON,
summary.json, summary.txt and summary.png into the output directory.

``check`` runs random client sessions against one protocol while a nemesis injects faults, then
checks the recorded history for causal consistency and the replicas for convergence and lost or
doubled writes (loadtest/check); exit status 1 if anything is wrong. ``soak`` does that for
every protocol, kind of topology and fault in turn until N operations are checked
(loadtest/check/soak.py).

``paper`` runs one of the Saturn paper's figures (or ``all``) and sets the paper's numbers beside
this run's (loadtest/paper.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from loadtest import paper
from loadtest.check.nemesis import FAULTS, OUTAGE_S
from loadtest.check.run import CheckSettings, passed, run_check
from loadtest.check.soak import PROTOCOLS as SOAK_PROTOCOLS
from loadtest.check.soak import Soak
from loadtest.check.workload import Mix
from loadtest.harness import registry
from loadtest.harness.options import cluster_store, positive
from loadtest.harness.report import say
from loadtest.harness.throughput_plots import plot_comparison, plot_results
from loadtest.workload.graph import generate, statistics
from loadtest.workload.locust_run import LocustOptions
from loadtest.workload.mix import MIXES
from loadtest.workload.placement import friend_locality, random_placement
from loadtest.workload.plan import Plan, PlanError, make_plan
from loadtest.workload.run import measure, run_protocol, running_topology
from loadtest.workload.summary import report, write_summary
from loadtest.workload.summary_plot import plot_summary
from services.launcher.cluster import read_state
from services.protocols import PROTOCOLS
from services.topology import Topology, TopologyError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = PROJECT_ROOT / "topologies" / "demo-3region.toml"
CHECK_TOPOLOGY = PROJECT_ROOT / "topologies" / "causality-3region.toml"
TARGETS = {"store": "StoreUser", "web": "WebUser"}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m loadtest", description=__doc__.split("\n")[0])
    commands = top.add_subparsers(dest="command", required=True)

    graph = commands.add_parser("graph", help="generate a social graph and print its statistics")
    graph.add_argument("--users", type=positive(int), default=2000)
    graph.add_argument("--seed", type=int, default=1)
    graph.add_argument("--out", required=True, help="file to write (.txt.gz)")

    def plan_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--topology", default=str(DEFAULT_TOPOLOGY), help="base topology (default: demo-3region)"
        )
        p.add_argument(
            "--users", type=positive(int), default=2000, help="social-network users (default: 2000)"
        )
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--min-replicas", type=positive(int), default=2, help="(default: 2, as the paper)")
        p.add_argument(
            "--max-replicas", type=positive(int), default=3, help="the paper swept 2-5 (default: 3)"
        )

    plan = commands.add_parser("plan", help="make a plan: graph, placement, topology with their groups")
    plan_arguments(plan)
    plan.add_argument("--out", required=True, help="plan directory to write")

    run = commands.add_parser("run", help="run the load test (both protocols side by side by default)")
    plan_arguments(run)
    run.add_argument("--plan", help="an existing plan directory (default: make one in the output directory)")
    run.add_argument(
        "--protocols", default="eventual,saturn", help="comma-separated (default: eventual,saturn)"
    )
    run.add_argument(
        "--target", choices=sorted(TARGETS), default="store", help="store (causal_client) or web"
    )
    run.add_argument("--clients", type=positive(int), default=20, help="Locust users (default: 20)")
    run.add_argument(
        "--duration", type=positive(float), default=60.0, help="seconds per protocol (default: 60)"
    )
    run.add_argument(
        "--mix", choices=sorted(MIXES), default="facebook", help="operation mix (default: facebook)"
    )
    run.add_argument("--think-ms", type=float, default=0.0, help="pause between operations (default: 0)")
    run.add_argument("--workers", type=int, default=0, help="distributed Locust: a master and N workers")
    run.add_argument("--running", help="use the cluster a launcher runs in this run directory (e.g. .run)")
    run.add_argument("--out", help="output directory (default: loadtest-results/<topology>-<target>-<mix>)")

    checked = commands.add_parser("check", help="random histories under faults, checked for causality")
    checked.add_argument(
        "--topology", default=str(CHECK_TOPOLOGY), help="topology file (default: causality-3region)"
    )
    checked.add_argument(
        "--protocol", default="saturn", choices=sorted(PROTOCOLS), help="the protocol (default: saturn)"
    )
    checked.add_argument(
        "--duration",
        type=positive(float),
        default=60.0,
        help="seconds (default: 60); a run goes on until each fault was done once, at most twice as long",
    )
    checked.add_argument("--sessions", type=positive(int), default=12, help="client sessions (default: 12)")
    checked.add_argument("--keys", type=positive(int), default=6, help="hot keys per group (default: 6)")
    checked.add_argument(
        "--strong-sessions",
        type=int,
        default=4,
        help="sessions of strong operations (the topology's [strong] mode) beside them, checked for "
        "linearizability "
        "(default: 4; 0: none)",
    )
    checked.add_argument(
        "--strong-mode",
        choices=["vivace", "token"],
        help="how strong operations are ordered (default: the topology's [strong] mode)",
    )
    checked.add_argument(
        "--shards",
        type=positive(int),
        help="shards per region (default: the topology's): transactions span them",
    )
    checked.add_argument(
        "--cluster-store",
        metavar="MASTERS[xREPLICAS]",
        type=cluster_store,
        help="each region's store a Redis Cluster of this many masters, with this many replicas each "
        "(default: 1), e.g. 2x1 (default: the topology's [store])",
    )
    checked.add_argument(
        "--bandwidth-mbit",
        type=positive(float),
        help="every link's bandwidth, each way (default: the topology's): the congestion fault needs one",
    )
    checked.add_argument(
        "--priority", action="store_true", help="with --bandwidth-mbit: critical metadata ahead of bulk data"
    )
    checked.add_argument(
        "--tls", action="store_true", help="every connection over TLS, the deployment's own certificates"
    )
    checked.add_argument(
        "--nemesis",
        default="none",
        help=f"comma-separated faults, 'all' or 'none' (default: none); known: {', '.join(FAULTS)}",
    )
    checked.add_argument("--interval", type=positive(float), default=6.0, help="seconds between faults")
    checked.add_argument("--fault-seconds", type=positive(float), default=2.0, help="how long a fault lasts")
    outage_option(checked)
    checked.add_argument("--seed", type=int, default=1)
    checked.add_argument(
        "--non-atomic",
        action="store_true",
        help="batches with atomic=False: the read-atomicity check must then find fractured reads",
    )
    checked.add_argument(
        "--running",
        help="check a deployment that runs already (a directory with its topology.json, e.g. a compose "
        "project's client/): no cluster started, no nemesis (faults come from outside)",
    )
    checked.add_argument("--out", help="output directory (default: check-results/<topology>-<protocol>)")
    soak = commands.add_parser(
        "soak", help="a long checked run: every protocol, topology kind and nemesis, until N operations"
    )
    soak.add_argument("--ops", type=positive(int), default=1_000_000, help="operations (default: 1M)")
    soak.add_argument("--nemesis", default="all", help=f"faults or all (default); known: {', '.join(FAULTS)}")
    soak.add_argument(
        "--protocols", default=",".join(SOAK_PROTOCOLS), help=f"(default: {','.join(SOAK_PROTOCOLS)})"
    )
    soak.add_argument("--sessions", type=positive(int), default=12, help="client sessions (default: 12)")
    outage_option(soak)
    soak.add_argument("--seed", type=int, default=1)
    soak.add_argument("--out", default=str(PROJECT_ROOT / "check-results" / "soak"), help="output directory")
    commands.add_parser(
        "bench", help="run one experiment (bench --list shows them; bench NAME --help)", add_help=False
    )
    plot = commands.add_parser("plot", help="redraw a saved run's figure (a bench's or a load test's)")
    plot.add_argument("results", help="the run's JSON: bench-results/<topology>.json or .../summary.json")
    paper.add_parser(commands)
    return top


def outage_option(parser: argparse.ArgumentParser) -> None:
    help_text = f"how long region-outage keeps a region down (default: {OUTAGE_S:.0f})"
    parser.add_argument("--outage-seconds", type=positive(float), default=OUTAGE_S, help=help_text)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its options are the experiment's own: the registry parses them
        return registry.main(argv[1:])
    args = parser().parse_args(argv)
    try:
        commands = {
            "graph": graph_command, "plan": plan_command, "run": run_command, "check": check_command,
            "soak": soak_command, "paper": paper.main, "plot": plot_command,
        }  # fmt: skip
        return commands[args.command](args)
    except (TopologyError, PlanError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def graph_command(args: argparse.Namespace) -> int:
    began = time.monotonic()
    graph = generate(args.users, seed=args.seed)
    graph.save(args.out)
    say(f"{args.out}: {graph.model} in {time.monotonic() - began:.1f} s")
    for line in statistics(graph).lines():
        say(f"  {line}")
    return 0


def plan_command(args: argparse.Namespace) -> int:
    plan = build_plan(args, Path(args.out))
    say(f"plan in {args.out}: {plan.topology.source}")
    return 0


def build_plan(args: argparse.Namespace, out: Path) -> Plan:
    base = Topology.load(args.topology)
    began = time.monotonic()
    say(f"making a {args.users:,}-user social graph and placing it over {len(base.regions)} regions ...")
    plan = make_plan(base, out, args.users, args.seed, args.min_replicas, args.max_replicas)
    randomly = random_placement(plan.graph, base, args.min_replicas, args.max_replicas, args.seed)
    say(
        f"  {plan.graph.users:,} users, {plan.graph.edges:,} friendships, "
        f"{len(plan.placement.groups())} replication groups "
        f"({plan.placement.min_replicas}-{plan.placement.max_replicas} replicas); "
        f"friends' data at the user's home: {friend_locality(plan.graph, plan.placement):.1%} "
        f"(random placement: {friend_locality(plan.graph, randomly):.1%}); {time.monotonic() - began:.1f} s"
    )
    return plan


def run_command(args: argparse.Namespace) -> int:
    base = Topology.load(args.topology)
    out = Path(args.out or PROJECT_ROOT / "loadtest-results" / f"{base.name}-{args.target}-{args.mix}")
    out.mkdir(parents=True, exist_ok=True)
    plan_dir = Path(args.plan) if args.plan else out / "plan"
    if not args.plan:
        build_plan(args, plan_dir)
    plan = Plan.load(plan_dir)
    options = LocustOptions(
        user_class=TARGETS[args.target], clients=args.clients, duration=args.duration, mix=args.mix,
        think_ms=args.think_ms, seed=args.seed, workers=args.workers,
    )  # fmt: skip
    runs = []
    if args.running:
        topology_file, _ = running_topology(Path(args.running))
        state = read_state(args.running) or {}
        pids = {name: p["pid"] for name, p in state.get("processes", {}).items()}
        runs.append(measure(plan_dir, topology_file, options, out, say, seed_first=False, processes=pids))
    else:
        for protocol in [p.strip() for p in args.protocols.split(",") if p.strip()]:
            runs.append(run_protocol(plan_dir, protocol, options, out, say))
    settings = {
        "topology": plan.topology.name, "users": plan.graph.users, "edges": plan.graph.edges,
        "mix": args.mix, "target": args.target, "clients": args.clients, "duration": args.duration,
        "workers": args.workers, "min_replicas": plan.placement.min_replicas,
        "max_replicas": plan.placement.max_replicas,
    }  # fmt: skip
    print()
    print(report(runs))
    for path in write_summary(out, settings, runs):
        say(f"wrote {path}")
    failed = sum(r.failed for r in runs)
    if failed:
        say(f"{failed} requests failed (see the tables and {out}/*_failures.csv)")
    return 1 if failed else 0


def named_faults(text: str) -> list[str]:
    faults = {"none": [], "all": list(FAULTS)}.get(text)
    if faults is None:
        faults = [f.strip() for f in text.split(",") if f.strip()]
        unknown = sorted(set(faults) - set(FAULTS))
        if unknown:
            raise ValueError(f"unknown faults {unknown} (known: {', '.join(FAULTS)})")
    return faults


def soak_command(args: argparse.Namespace) -> int:
    protocols = tuple(p.strip() for p in args.protocols.split(",") if p.strip())
    unknown = sorted(set(protocols) - set(PROTOCOLS))
    if unknown or not protocols:
        raise ValueError(f"unknown protocols {unknown} (known: {', '.join(sorted(PROTOCOLS))})")
    faults = tuple(named_faults(args.nemesis))
    if not faults:
        raise ValueError("a soak needs at least one fault")
    soak = Soak(
        args.ops,
        Path(args.out),
        faults,
        protocols,
        args.sessions,
        seed=args.seed,
        outage_s=args.outage_seconds,
    )
    return soak.run(say)


def check_command(args: argparse.Namespace) -> int:
    faults = named_faults(args.nemesis)
    if args.fault_seconds >= args.interval:
        raise ValueError("--fault-seconds must be shorter than --interval")
    if args.running and faults:
        raise ValueError("--running checks a deployment as it is: give --nemesis none (faults from outside)")
    topology = running_topology(Path(args.running))[1] if args.running else Topology.load(args.topology)
    protocol = topology.protocol if args.running else args.protocol
    out = Path(args.out or PROJECT_ROOT / "check-results" / f"{topology.name}-{protocol}")
    settings = CheckSettings(
        topology=Path(args.topology), protocol=protocol, duration=args.duration,
        sessions=args.sessions, keys_per_group=args.keys, faults=faults, interval_s=args.interval,
        fault_s=args.fault_seconds, seed=args.seed, out=out, mix=Mix(atomic=not args.non_atomic),
        shards=args.shards, cluster_store=args.cluster_store, bandwidth_mbit=args.bandwidth_mbit,
        priority=args.priority, tls=args.tls,
        running=Path(args.running) if args.running else None, strong_sessions=max(0, args.strong_sessions),
        strong_mode=args.strong_mode, outage_s=args.outage_seconds,
    )  # fmt: skip
    return 0 if passed(run_check(settings, say)) else 1


def plot_command(args: argparse.Namespace) -> int:
    """Redraws a saved run: a load test's summary.json or a throughput bench's results."""
    source = Path(args.results)
    data = json.loads(source.read_text())
    if "runs" in data and "settings" in data and "users" in data["settings"]:
        print(plot_summary(data, source.with_suffix(".png")))
        return 0
    print(plot_results(data, source.with_suffix(".png")))
    if data.get("comparison"):
        print(plot_comparison(data, source.with_name(f"{source.stem}-compare.png")))
    return 0
