"""The command line: arguments checked against the topology before anything starts, one run per
protocol, then the tables, the files and the exit status (see the package docstring)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis

from causal_client import CausalError
from loadtest.bench.compare import comparison, comparison_tables
from loadtest.bench.harness import BenchError, find_base_port, running_protocol, started, with_overrides
from loadtest.bench.measure import bench_protocol
from loadtest.bench.report import report, results_json, say, write_outputs
from loadtest.bench.results import ProtocolRun, Settings
from services.launcher.cluster import LaunchError
from services.launcher.redis_binary import RedisNotFound
from services.topology import Topology, TopologyError, load_topology

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TOPOLOGY = PROJECT_ROOT / "topologies" / "demo-3region.toml"


@dataclass(frozen=True)
class Variant:
    """A variant of a protocol, named "protocol+variant": the environment its services run with,
    and fields of the topology it runs with."""

    env: dict[str, str] = field(default_factory=dict)
    topology: dict[str, object] = field(default_factory=dict)
    gateway: bool = False  # the load's clients call the regions' gRPC gateways, not their stores


VARIANTS: dict[str, Variant] = {
    # saturn without §4.4 (concurrent labels wait too)
    "serial": Variant(env={"SATURN_CONCURRENT_APPLY": "0"}),
    # heartbeats leave as soon as due, each on its own
    "eager": Variant(env={"SATURN_HEARTBEAT_SLACK": "0"}),
    # the stores fsync their AOF once a second (Redis's advice for speed) instead of before replying
    "everysec": Variant(topology={"appendfsync": "everysec"}),
    # clients through the gRPC gateway (a Python hop before the gears), as every client was before
    "gateway": Variant(gateway=True),
}
# What makes one protocol's run fail without stopping the others.
RUN_FAILURES = (BenchError, LaunchError, RedisNotFound, CausalError, redis.RedisError, OSError)


def _positive(kind: type) -> Callable[[str], float]:
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.bench",
        description="Causal store vs raw Redis throughput and latency; remote-update visibility per pair.",
    )
    add = parser.add_argument
    add(
        "--topology",
        default=str(DEFAULT_TOPOLOGY),
        help="topology file (default: topologies/demo-3region.toml)",
    )
    add("--clients", type=_positive(int), default=8, help="concurrent closed-loop clients (default: 8)")
    add("--duration", type=_positive(float), default=10.0, help="measured seconds per phase (default: 10)")
    add("--warmup", type=float, default=1.0, help="unmeasured seconds before each phase (default: 1)")
    add("--value-size", type=_positive(int), default=2, help="value bytes, 2 as in the paper (default: 2)")
    add("--keys", type=_positive(int), default=1000, help="distinct rows, chosen uniformly (default: 1000)")
    add(
        "--protocols",
        help="comma-separated, one run each; 'saturn+serial' is saturn without §4.4, 'saturn+eager' "
        "without heartbeat slack, 'P+everysec' with stores fsyncing once a second instead of before "
        "every reply, 'P+gateway' with the clients calling the gRPC gateways instead of the stores "
        "(default: the topology's protocol)",
    )
    add(
        "--repeat",
        type=_positive(int),
        default=1,
        help="rounds of all protocols, alternating their order; comparisons use medians (default: 1)",
    )
    add("--region", help="where the load clients attach (default: the topology's first region)")
    add("--group", default="all", help="replication group written (default: all)")
    add(
        "--probe-writes",
        type=_positive(int),
        default=300,
        help="visibility probe writes per region (default: 300)",
    )
    add("--probe-rate", type=_positive(float), default=100.0, help="visibility probe writes/s (default: 100)")
    add(
        "--probe-together",
        action="store_true",
        help="every region probes at the same time (labels of several origins interleave, where "
        "§4.4 matters) instead of in turn",
    )
    add(
        "--idle",
        type=float,
        default=5.0,
        help="seconds the idle cluster's CPU is measured before the load (0: skip; default: 5)",
    )
    add("--base-port", type=int, help="first port of the started cluster (default: a free block)")
    add("--attach", action="store_true", help="measure the cluster already running at the topology's ports")
    add("--out", default="bench-results", help="where results and cluster logs go (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.idle < 0:
        parser.error("--idle must be >= 0")
    return args


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


def split_variant(protocol: str) -> tuple[str, Variant]:
    """'saturn+serial' -> ('saturn', its variant); raises BenchError for an unknown variant."""
    name, _, variant = protocol.partition("+")
    if variant and variant not in VARIANTS:
        raise BenchError(f"unknown variant {variant!r} of {name!r} (known: {', '.join(VARIANTS)})")
    return name, VARIANTS.get(variant, Variant())


@contextlib.contextmanager
def variant_environment(env: dict[str, str]) -> Iterator[None]:
    """The services started inside inherit ``env`` (the launcher passes its environment on)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status: 0, 1 when a protocol could not be measured, 2 on bad arguments, 130 on Ctrl-C."""
    args = parse_args(argv)
    try:
        topology = load_topology(args.topology)  # a .toml, or a running deployment's topology.json
        if args.base_port:
            topology = with_overrides(topology, base_port=args.base_port)
        settings = settings_for(args, topology)
        protocols: list[str | None] = [p.strip() for p in (args.protocols or "").split(",") if p.strip()]
        for protocol in protocols:
            with_overrides(topology, protocol=split_variant(protocol)[0])  # unknown names fail here
    except (TopologyError, BenchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not protocols:
        protocols = [None if args.attach else topology.protocol]

    names = ", ".join(p or "as running" for p in protocols)
    say(
        f"bench: {topology.name} ({topology.source}), protocols {names}; "
        f"{settings.clients} clients at {settings.region}, {settings.duration:g} s per phase "
        f"(+{settings.warmup:g} s warm-up), {settings.value_size}-byte values, {settings.keys:,} keys"
    )
    runs: list[ProtocolRun] = []
    errors: dict[str, str] = {}
    rounds = 1 if args.attach else args.repeat
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
