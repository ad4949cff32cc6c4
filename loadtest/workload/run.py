"""One load-test run of one protocol: start the plan's topology (or use a running one), seed the
social network, run Locust for the given time, and read the services' metrics around it."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from causal_client import CausalClient
from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.cpu import CLIENT_ROLE, CpuMeter, by_role, used_between
from loadtest.harness.metrics import Pair, parse_histograms, scrape, scrape_visibility
from loadtest.harness.stats import Histogram, to_ms
from loadtest.harness.visibility import visibility_rows
from loadtest.workload.locust_run import LocustOptions, RequestStats, read_failures, run_locust
from loadtest.workload.plan import Plan
from loadtest.workload.population import seed, username, wait_seeded
from loadtest.workload.summary import LOAD_GENERATOR, AttachRow, MigrationRow, ProtocolSummary
from services.topology import Topology, load_topology

ATTACH_METRIC = "causal_attach_wait_seconds"
SETTLE_S = 2.0  # after Locust stops: updates in flight become visible (and counted)
Say = Callable[[str], None]

AttachKey = tuple[str, str, str]  # (region, origin, kind)


def parse_attach(text: str) -> dict[AttachKey, Histogram]:
    return parse_histograms(text, ATTACH_METRIC, ("region", "origin", "kind"))  # type: ignore[return-value]


def run_protocol(
    plan_dir: Path, protocol: str, options: LocustOptions, out_dir: Path, say: Say
) -> ProtocolSummary:
    """Starts the plan's topology under ``protocol`` on free ports, with the web tier if the
    target is the web app, and measures it; everything is stopped afterwards."""
    plan = Plan.load(plan_dir)
    topology = with_overrides(plan.topology, protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    run_dir = out_dir / f"run-{protocol}"
    with started(topology, run_dir, web=options.user_class == "WebUser") as cluster:
        pids = {name: running.popen.pid for name, running in cluster.processes.items()}
        return measure(
            plan_dir, cluster.topology_file, options, out_dir, say, seed_first=True, processes=pids
        )


def children_cpu_s() -> float:
    """CPU seconds of this process's children that have ended (Locust, master and workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    plan_dir: Path,
    topology_file: Path,
    options: LocustOptions,
    out_dir: Path,
    say: Say,
    seed_first: bool,
    processes: Mapping[str, int] | None = None,
) -> ProtocolSummary:
    """Seeds (unless the population is there already), runs Locust, reads the metrics; with
    ``processes`` (the cluster's, name -> pid), the CPU each role used per operation."""
    topology = load_topology(str(topology_file))
    plan = Plan.load(plan_dir, topology_file)
    protocol = topology.protocol
    began = time.monotonic()
    with CausalClient.connect(
        topology.store_endpoints(topology.region_names[0]), endpoints=topology.client_endpoints()
    ) as client:
        if seed_first or not seeded(client, plan):
            say(f"[{protocol}] seeding {plan.graph.users:,} users, {plan.graph.edges:,} friendships ...")
            last = seed(
                client, plan.graph, plan.placement, progress=lambda n, t: say(f"[{protocol}]   {n:,}/{t:,}")
            )
            wait_seeded(client, topology, last)
    seed_seconds = time.monotonic() - began
    say(f"[{protocol}] seeded and replicated everywhere in {seed_seconds:.1f} s")
    visible_before, attach_before = scrape_visibility(topology), scrape(topology, parse_attach)
    prefix = out_dir / protocol
    say(
        f"[{protocol}] Locust: {options.clients} {options.user_class}s, {options.mix} mix, "
        f"{options.duration:g} s"
    )
    meter = CpuMeter(processes) if processes else None
    cpu_before, generator_before = (meter.snapshot() if meter else {}), children_cpu_s()
    requests = run_locust(
        options, plan_dir, topology_file, prefix, lambda note: say(f"[{protocol}]   {note}")
    )
    cpu_used = used_between(cpu_before, meter.snapshot()) if meter else {}
    cpu_used.pop(CLIENT_ROLE, None)  # this process only waited; Locust's processes are counted below
    generator_s = children_cpu_s() - generator_before
    time.sleep(SETTLE_S)
    visible_after, attach_after = scrape_visibility(topology), scrape(topology, parse_attach)
    pairs = [(a, b) for a in topology.region_names for b in topology.region_names if a != b]
    return ProtocolSummary(
        protocol=protocol,
        target="web" if options.user_class == "WebUser" else "store",
        clients=options.clients,
        duration=options.duration,
        requests=requests,
        visibility=[r for r in visibility_rows(topology, visible_after, visible_before, pairs)],
        migrations=migration_rows(requests, attach_after, attach_before),
        update_attaches=update_attach_rows(attach_after, attach_before),
        cpu_s={**by_role(cpu_used), LOAD_GENERATOR: generator_s} if meter else {},
        failures=read_failures(prefix),
        seed_seconds=seed_seconds,
    )


def seeded(client: CausalClient, plan: Plan) -> bool:
    """Whether the plan's last user already has an account (a running cluster seeded before)."""
    last = plan.graph.users - 1
    session = client.session(plan.placement.home[last])
    return "password" in session.read("all", f"account:{username(last)}", ["password"])


def migration_rows(
    requests: list[RequestStats], after: dict[AttachKey, Histogram], before: dict[AttachKey, Histogram]
) -> list[MigrationRow]:
    """Per (from, to): the client's view (Locust's ``migrate`` requests, store target) and the
    attach's wait at the target (the metric, any target)."""
    rows: dict[Pair, MigrationRow] = {}
    for (region, origin, kind), histogram in sorted(after.items()):
        if kind != "migration":
            continue
        delta = histogram.minus(before.get((region, origin, kind)))
        if delta.count <= 0:
            continue
        rows[(origin, region)] = MigrationRow(
            origin,
            region,
            int(delta.count),
            wait_mean_ms=to_ms(delta.mean),
            wait_p90_ms=to_ms(delta.quantile(0.9)),
        )
    for r in requests:
        if r.kind != "migrate" or "→" not in r.name:
            continue
        origin, region = r.name.split("→", 1)
        row = rows.setdefault((origin, region), MigrationRow(origin, region, r.requests))
        row.client_mean_ms, row.client_p90_ms = r.mean_ms, r.p90_ms
    return [rows[pair] for pair in sorted(rows)]


def update_attach_rows(
    after: dict[AttachKey, Histogram], before: dict[AttachKey, Histogram]
) -> list[AttachRow]:
    """Per (label's origin, region): attaches that presented another region's update label."""
    rows = []
    for (region, origin, kind), histogram in sorted(after.items()):
        if kind != "update" or origin == region:
            continue  # a region's own labels never wait
        delta = histogram.minus(before.get((region, origin, kind)))
        if delta.count > 0:
            wait_mean, wait_p90 = to_ms(delta.mean), to_ms(delta.quantile(0.9))
            rows.append(AttachRow(origin, region, int(delta.count), wait_mean, wait_p90))
    return rows


def running_topology(run_dir: Path) -> tuple[Path, Topology]:
    """The topology a launcher started in ``run_dir`` is running (its topology.json)."""
    path = run_dir / "topology.json"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no topology.json; is a cluster running there (launcher up)?")
    return path, load_topology(str(path))
