"""One protocol measured on a running cluster: the load phases (causal then raw, per operation),
then the visibility probe from each region in turn, each followed by waiting for replication."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from functools import partial

import redis

from causal_client import CausalClient, tls
from loadtest.harness.cpu import CLIENT_ROLE, CpuByProcess, CpuMeter, used_between
from loadtest.harness.loop import Op, run_closed_loop, summarize
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.report import num, say
from loadtest.harness.results import OP_TITLES, OPS, PhaseResult, ProtocolRun, Settings, VisibilityRow
from loadtest.harness.stats import Histogram
from loadtest.harness.visibility import (
    DRAIN_TIMEOUT_S,
    expected_visible,
    probe_writes,
    remote_pairs,
    visibility_rows,
    wait_replicated,
)
from loadtest.harness.workload import Workload, causal_op, preload, raw_op
from services import auth
from services.topology import Topology


def measure_phase(
    run: ProtocolRun,
    system: str,
    kind: str,
    make_op: Callable[[int], Op],
    settings: Settings,
    meter: CpuMeter | None = None,
) -> PhaseResult:
    """One closed-loop phase, said before and after, recorded in ``run``; with a ``meter``, the
    CPU every process used in the measured window."""
    label = f"[{run.protocol}] {system:<6} {OP_TITLES[kind]:<7}"
    say(f"{label} {settings.clients} clients, {settings.warmup:g} s warm-up + {settings.duration:g} s ...")
    ops = [make_op(i) for i in range(settings.clients)]
    edges: dict[str, CpuByProcess] = {}

    def at_edge(edge: str) -> None:
        if meter is not None:
            edges[edge] = meter.snapshot()

    stats = run_closed_loop(ops, settings.warmup, settings.duration, at_edge)
    result = summarize(system, kind, stats, settings.duration)
    if "open" in edges and "close" in edges:
        result.cpu_s = used_between(edges["open"], edges["close"])
    errors = f", {result.errors} errors (first: {result.first_error})" if result.errors else ""
    say(
        f"{label} {result.ops_per_s:,.0f} ops/s, p50 {num(result.p50_ms, 2)} ms, "
        f"p99 {num(result.p99_ms, 2)} ms{errors}"
    )
    run.phases.append(result)
    return result


def load_phases(
    run: ProtocolRun,
    client: CausalClient,
    db: redis.Redis,
    work: Workload,
    settings: Settings,
    meter: CpuMeter | None = None,
) -> int:
    """Each operation through the client library, then raw, back to back (same machine state);
    returns how many causal writes were made (replication owes them to every other replica)."""
    for n, kind in enumerate(OPS):
        seed = 1000 * n  # the same key sequence for causal and raw
        causal = measure_phase(
            run, "causal", kind, partial(causal_op, client, run.region, kind, work, seed), settings, meter
        )
        measure_phase(run, "raw", kind, partial(raw_op, db, kind, work, seed), settings)
        run.load_writes += causal.writes_issued
    return run.load_writes


def drain(
    run: ProtocolRun,
    topology: Topology,
    group: str,
    baseline: dict[Pair, Histogram],
    origin: str,
    writes: int,
) -> dict[Pair, Histogram]:
    """Waits until ``origin``'s ``writes`` since ``baseline`` are visible at every other replica and
    returns the snapshot; what is still missing at the deadline is recorded and said at once."""
    expected = expected_visible(topology, group, {origin: writes})
    snapshot, short = wait_replicated(topology, baseline, expected, DRAIN_TIMEOUT_S)
    run.note_missing(short)
    for (source, region), missing in short.items():
        say(f"[{run.protocol}] WARNING: {missing} updates from {source} still not visible at {region} "
            f"after {DRAIN_TIMEOUT_S:g} s")  # fmt: skip
    return snapshot


def probe_visibility(
    run: ProtocolRun,
    topology: Topology,
    client: CausalClient,
    work: Workload,
    origin: str,
    settings: Settings,
) -> list[VisibilityRow]:
    """Visibility of ``origin``'s updates at every other replica. Origins take turns (each one's
    updates drained before the next starts): with all writing at once, a small machine running
    every region's processes queues updates on its CPUs, which is not what this measures."""
    say(
        f"[{run.protocol}] visibility probe from {origin}: {settings.probe_writes} writes "
        f"at {settings.probe_rate:g}/s ..."
    )
    before = scrape_visibility(topology)
    probe_writes(client, origin, work, settings.probe_writes, settings.probe_rate)
    after = drain(run, topology, work.group, before, origin, settings.probe_writes)
    return visibility_rows(topology, after, before, remote_pairs(topology, work.group, origin))


def probe_visibility_together(
    run: ProtocolRun, topology: Topology, client: CausalClient, work: Workload, settings: Settings
) -> list[VisibilityRow]:
    """Every replica writes its probes at the same time: each proxy then receives labels of
    several origins interleaved, the case §4.4 (concurrent labels) is about."""
    origins = list(topology.group_members[work.group])
    say(
        f"[{run.protocol}] visibility probe from {', '.join(origins)} together: "
        f"{settings.probe_writes} writes each at {settings.probe_rate:g}/s ..."
    )
    before = scrape_visibility(topology)
    writers = [
        threading.Thread(
            target=probe_writes, args=(client, o, work, settings.probe_writes, settings.probe_rate)
        )
        for o in origins
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    expected = expected_visible(topology, work.group, dict.fromkeys(origins, settings.probe_writes))
    after, short = wait_replicated(topology, before, expected, DRAIN_TIMEOUT_S)
    run.note_missing(short)
    pairs = [pair for origin in origins for pair in remote_pairs(topology, work.group, origin)]
    return visibility_rows(topology, after, before, pairs)


def measure_idle(run: ProtocolRun, meter: CpuMeter, seconds: float) -> None:
    """What the cluster costs with nobody using it (heartbeats, polling), as fractions of a core."""
    say(f"[{run.protocol}] idle cluster: CPU over {seconds:g} s ...")
    before = meter.snapshot()
    time.sleep(seconds)
    used = used_between(before, meter.snapshot())
    run.idle_cpu = {process: cpu / seconds for process, cpu in used.items() if process != CLIENT_ROLE}
    say(f"[{run.protocol}] idle cluster: {100 * sum(run.idle_cpu.values()):.1f} % of one core")


def bench_protocol(
    topology: Topology,
    protocol: str,
    settings: Settings,
    processes: Mapping[str, int] | None = None,
    gateway: bool = False,
) -> ProtocolRun:
    """Every measurement against one running cluster: the idle cost, the load phases, then the
    visibility probe. ``processes`` (name -> pid) lets it read every process's CPU time;
    ``gateway``: the clients call the regions' gRPC gateways instead of their stores."""
    region, group = settings.region, settings.group
    work = Workload(group, settings.keys, b"x" * settings.value_size)
    run = ProtocolRun(protocol, region)
    meter = CpuMeter(processes) if processes is not None else None
    if meter is not None and not meter.available:
        meter = None
    if gateway:
        client = CausalClient.connect_gateway(
            topology.frontend_endpoint(region), endpoints=topology.frontend_endpoints()
        )
    else:
        client = CausalClient.connect(topology.client_address(region), endpoints=topology.client_endpoints())
    db = redis.Redis(
        host=topology.node_host(region),
        port=topology.redis_port(region, 0),
        password=auth.secret(),
        max_connections=settings.clients,
        **tls.redis_options(),  # type: ignore[arg-type]
    )
    try:
        say(f"[{protocol}] preloading {work.keys:,} keys ({settings.value_size}-byte values) at {region} ...")
        before = scrape_visibility(topology)  # earlier traffic (--attach) is subtracted out
        written = preload(client, db, region, work)
        start = drain(run, topology, group, before, region, written)
        if meter is not None and settings.idle > 0:
            measure_idle(run, meter, settings.idle)

        load_writes = load_phases(run, client, db, work, settings, meter)
        say(f"[{protocol}] waiting for the {load_writes:,} load writes to be visible at every replica ...")
        after_load = drain(run, topology, group, start, region, load_writes)
        load_pairs = remote_pairs(topology, group, region)
        run.visibility_load = visibility_rows(topology, after_load, start, load_pairs)

        if settings.probe_together:
            run.visibility_probe += probe_visibility_together(run, topology, client, work, settings)
        else:
            for origin in topology.group_members[group]:
                run.visibility_probe += probe_visibility(run, topology, client, work, origin, settings)
    finally:
        client.close()
        db.close()
    return run
