"""Benchmark: what the causal layer costs next to raw Redis, and how fast remote updates show up.

    python -m loadtest bench throughput            # demo-3region, 8 clients, 10 s a phase
    python -m loadtest bench throughput --topology topologies/two-region.toml --clients 4 --duration 5
    python -m loadtest bench throughput --protocols eventual,saturn       # one full run per protocol
    python -m loadtest bench throughput --attach --topology topologies/demo-3region.toml  # running

For each protocol, one run:

1. starts the topology with the project's launcher on a free block of ports (``--base-port`` to
   choose it), or with ``--attach`` measures the cluster already running at the topology's ports;
2. closed-loop load from ``--clients`` threads, each with its own session attached to one region
   (``--region``, default the first): causal reads, causal writes and a 9:1 read:write mix through
   ``causal_client``, each next to the same operations done by redis-py straight against that
   region's Redis (HGET/HSET of a value of the same size, the shape of a stored cell). The ratio
   causal/raw is the price of the causal layer (gRPC frontend, labels, Lua gear, replication log)
   on the same machine. Every phase is warmed up first (connections, pools, caches);
3. remote-update visibility: each region in turn writes at a moderate rate to the all-replicated
   group; each region's ``causal_visibility_seconds{region,origin}`` histogram (from its /metrics) gives,
   per region pair, how long an update took from applied at its origin to visible remotely, next
   to the configured one-way latency of the link. The same is shown for the load phases' writes;
4. prints aligned tables and writes ``<out>/<topology>.json`` and ``<out>/<topology>.png``.

What it writes (mind it with --attach): rows ``bench:<i>`` and ``probe:<region>:<i>`` (column
``v``) in ``--group``, and hashes ``bench-raw:<i>`` straight into the load region's first Redis.

Everything it started is stopped on the way out, Ctrl-C included. Exit status: 0, 1 when a protocol
could not be measured (e.g. not implemented yet: the services' own error is printed), 2 on bad
arguments, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import redis

from causal_client import CausalError
from loadtest.bench.compare import comparison, comparison_tables
from loadtest.bench.measure import bench_protocol
from loadtest.bench.throughput_report import report, results_json, write_outputs
from loadtest.harness.cluster import BenchError, find_base_port, running_protocol, started, with_overrides
from loadtest.harness.experiment import Experiment
from loadtest.harness.options import non_negative, positive
from loadtest.harness.report import say
from loadtest.harness.results import ProtocolRun, Settings
from loadtest.harness.variants import split_variant, variant_environment
from services.launcher.cluster import LaunchError
from services.launcher.redis_binary import RedisNotFound
from services.topology import Topology, TopologyError, load_topology

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOPOLOGY = PROJECT_ROOT / "topologies" / "demo-3region.toml"


# What makes one protocol's run fail without stopping the others.
RUN_FAILURES = (BenchError, LaunchError, RedisNotFound, CausalError, redis.RedisError, OSError)


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--clients", type=positive(int), default=8, help="concurrent closed-loop clients (default: 8)")
    add("--duration", type=positive(float), default=10.0, help="measured seconds per phase (default: 10)")
    add("--warmup", type=non_negative, default=1.0, help="unmeasured seconds before each phase (default: 1)")
    add("--value-size", type=positive(int), default=2, help="value bytes, 2 as in the paper (default: 2)")
    add("--keys", type=positive(int), default=1000, help="distinct rows, chosen uniformly (default: 1000)")
    add(
        "--protocols",
        help="comma-separated, one run each; 'saturn+serial' is saturn without §4.4, 'saturn+eager' "
        "without heartbeat slack, 'P+everysec' with stores fsyncing once a second instead of before "
        "every reply, 'P+gateway' with the clients calling the gRPC gateways instead of the stores, "
        "'P+cluster' with each region's store a one-master Redis Cluster ('P+cluster-replica': with a "
        "replica that has each write before it is acknowledged) "
        "(default: the topology's protocol)",
    )
    add("--repeat", dest="rounds", type=positive(int), help="the same as --rounds")
    add("--region", help="where the load clients attach (default: the topology's first region)")
    add("--group", default="all", help="replication group written (default: all)")
    add(
        "--probe-writes",
        type=positive(int),
        default=300,
        help="visibility probe writes per region (default: 300)",
    )
    add("--probe-rate", type=positive(float), default=100.0, help="visibility probe writes/s (default: 100)")
    add(
        "--probe-together",
        action="store_true",
        help="every region probes at the same time (labels of several origins interleave, where "
        "§4.4 matters) instead of in turn",
    )
    add(
        "--idle",
        type=non_negative,
        default=5.0,
        help="seconds the idle cluster's CPU is measured before the load (0: skip; default: 5)",
    )
    add("--attach", action="store_true", help="measure the cluster already running at the topology's ports")


def settings_for(args: argparse.Namespace, topology: Topology) -> Settings:
    """Checks the arguments against the topology before anything starts."""
    region = args.region or topology.region_names[0]
    topology.region(region)  # raises TopologyError naming the known regions
    members = topology.group_members.get(args.group)
    if members is None:
        raise BenchError(
            f"no group {args.group!r} in {topology.source} (have {sorted(topology.group_members)})"
        )
    if region not in members:
        raise BenchError(f"group {args.group!r} is not replicated at {region!r} (only at {list(members)})")
    if args.value_size > topology.max_value_bytes:
        raise BenchError(f"--value-size {args.value_size} exceeds the topology's max_value_bytes")
    return Settings(
        clients=args.clients, duration=args.duration, warmup=args.warmup, value_size=args.value_size,
        keys=args.keys, group=args.group, region=region, probe_writes=args.probe_writes,
        probe_rate=args.probe_rate, probe_together=args.probe_together, idle=args.idle,
    )  # fmt: skip


def run_protocol(
    args: argparse.Namespace, topology: Topology, protocol: str | None, settings: Settings
) -> ProtocolRun:
    """One protocol: a cluster of its own (or the attached one), measured."""
    if args.attach:
        actual = running_protocol(topology, settings.region)
        if protocol not in (None, actual):
            raise BenchError(f"--attach: the running cluster runs {actual!r}, not {protocol!r}")
        say(f"[{actual}] attached to {topology.name} at {topology.client_address(settings.region)}")
        return bench_protocol(topology, actual, settings)
    assert protocol is not None
    name, variant = split_variant(protocol)
    configured = with_overrides(
        topology, protocol=name, base_port=args.base_port or find_base_port(topology), **variant.topology
    )
    with variant_environment(variant.env), started(configured, Path(args.out) / f"run-{protocol}") as cluster:
        pids = {name: running.popen.pid for name, running in cluster.processes.items()}
        return bench_protocol(configured, protocol, settings, pids, gateway=variant.gateway)


def run(args: argparse.Namespace) -> int:
    """Exit status: 0, 1 when a protocol could not be measured, 2 on bad arguments, 130 on Ctrl-C."""
    try:
        topology = load_topology(args.topology)  # a .toml, or a running deployment's topology.json
        if args.base_port:
            topology = with_overrides(topology, base_port=args.base_port)
        settings = settings_for(args, topology)
        named = [p.strip() for p in (args.protocols or "").split(",") if p.strip()]
        for protocol in named:
            with_overrides(topology, protocol=split_variant(protocol)[0])  # unknown names fail here
    except (TopologyError, BenchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    protocols: list[str | None] = [*named] or [None if args.attach else topology.protocol]

    names = ", ".join(p or "as running" for p in protocols)
    say(
        f"bench: {topology.name} ({topology.source}), protocols {names}; "
        f"{settings.clients} clients at {settings.region}, {settings.duration:g} s per phase "
        f"(+{settings.warmup:g} s warm-up), {settings.value_size}-byte values, {settings.keys:,} keys"
    )
    runs: list[ProtocolRun] = []
    errors: dict[str, str] = {}
    rounds = 1 if args.attach else args.rounds
    try:
        for round_ in range(rounds):
            if rounds > 1:
                say(f"round {round_ + 1} of {rounds}")
            for protocol in protocols if round_ % 2 == 0 else protocols[::-1]:
                if (protocol or "running") in errors:
                    continue
                try:
                    run = run_protocol(args, topology, protocol, settings)
                except RUN_FAILURES as exc:
                    errors[protocol or "running"] = str(exc)
                    say(f"[{protocol or 'running'}] FAILED: {exc}")
                else:
                    run.round = round_
                    runs.append(run)
    except KeyboardInterrupt:
        say("interrupted: everything started was stopped; no results written")
        return 130

    for run in runs:
        title = f"round {run.round + 1}: " if rounds > 1 else ""
        say("\n" + title + report(run, settings))
    results = results_json(topology, settings, runs, errors)
    compared = comparison(topology, runs)
    if compared:
        results["comparison"] = compared
        say("\n" + comparison_tables(compared))
    for path in write_outputs(Path(args.out), results):
        say(f"wrote {path}")
    if errors:
        # The last line of a launch failure is the service's own exception: the part worth repeating.
        say("failed: " + "; ".join(f"{p}: {e.strip().splitlines()[-1]}" for p, e in errors.items()))
    return 1 if errors else 0


EXPERIMENT = Experiment(
    name="throughput",
    summary="the causal layer against raw Redis (throughput, latency, CPU by role) and visibility per pair",
    minutes=(1.0, 1.5),
    run=run,
    arguments=arguments,
    shared={"topology": DEFAULT_TOPOLOGY, "rounds": 1, "out": "bench-results", "base_port": None},
    about=__doc__ or "",
)
