"""Benchmark: what the causal layer costs next to raw Redis, and how fast remote updates show up.

    python -m loadtest.bench                                   # demo-3region, 8 clients, 10 s a phase
    python -m loadtest.bench --topology topologies/two-region.toml --clients 4 --duration 5
    python -m loadtest.bench --protocols eventual,saturn       # one full run per protocol
    python -m loadtest.bench --attach --topology topologies/demo-3region.toml   # an already running one

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
import contextlib
import json
import math
import os
import platform
import random
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import redis
from prometheus_client.parser import text_string_to_metric_families

from causal_client import CausalClient, CausalError, Mutation
from causal_client.proto import store_pb2
from services.launcher.cluster import Cluster, LaunchError
from services.launcher.redis_binary import RedisNotFound
from services.topology import Topology, TopologyError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOPOLOGY = PROJECT_ROOT / "topologies" / "demo-3region.toml"
VISIBILITY_METRIC = "causal_visibility_seconds"
COLUMN = "v"
OPS = ("read", "write", "mix")
OP_TITLES = {"read": "read", "write": "write", "mix": "mix 9:1"}
MIX_READ_FRACTION = 0.9
PRELOAD_BATCH = 500  # rows per Batch call while preloading (the server takes up to 1000)
DRAIN_TIMEOUT_S = 60.0  # how long replication may lag behind before updates count as missing
ERROR_PAUSE_S = 0.01

Pair = tuple[str, str]  # (origin region, region where the update became visible)
Op = Callable[[], bool]  # one operation; returns True when it was a write


# -- latency statistics -------------------------------------------------------------------------
def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """``q``-quantile (0..1) of already sorted samples, interpolating between neighbours."""
    if not sorted_values:
        return None
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram: cumulative counts per upper bound (ascending, last one +Inf)."""

    buckets: tuple[tuple[float, float], ...]
    sum: float = 0.0
    count: float = 0.0

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def minus(self, earlier: Histogram | None) -> Histogram:
        """What was observed since ``earlier`` (counters only grow, so differences are exact)."""
        if earlier is None:
            return self
        before = dict(earlier.buckets)
        buckets = tuple((bound, count - before.get(bound, 0.0)) for bound, count in self.buckets)
        return Histogram(buckets, self.sum - earlier.sum, self.count - earlier.count)

    def quantile(self, q: float) -> float | None:
        """Estimated like PromQL's histogram_quantile: linear interpolation inside the bucket
        holding rank ``q * count``; a rank in the +Inf bucket gives the highest finite bound."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return lower_bound
                in_bucket = cumulative - lower_count
                if in_bucket <= 0:
                    return lower_bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket
            lower_bound, lower_count = bound, cumulative
        return lower_bound


def parse_visibility(text: str) -> dict[Pair, Histogram]:
    """The visibility histograms in one /metrics page, keyed by (origin, region)."""
    buckets: dict[Pair, list[tuple[float, float]]] = {}
    sums: dict[Pair, float] = {}
    counts: dict[Pair, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != VISIBILITY_METRIC:
            continue
        for sample in family.samples:
            pair = (sample.labels["origin"], sample.labels["region"])
            if sample.name.endswith("_bucket"):
                buckets.setdefault(pair, []).append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                sums[pair] = sample.value
            elif sample.name.endswith("_count"):
                counts[pair] = sample.value
    return {
        pair: Histogram(tuple(sorted(b)), sums.get(pair, 0.0), counts.get(pair, 0.0))
        for pair, b in buckets.items()
    }


def scrape_visibility(topology: Topology) -> dict[Pair, Histogram]:
    """Every region's visibility histograms (each region reports the updates it received)."""
    snapshot: dict[Pair, Histogram] = {}
    for region in topology.region_names:
        url = f"http://{topology.host}:{topology.metrics_port(region)}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            snapshot.update(parse_visibility(reply.read().decode()))
    return snapshot


# -- results ------------------------------------------------------------------------------------
@dataclass
class PhaseResult:
    system: str  # "causal" or "raw"
    op: str  # "read", "write" or "mix"
    clients: int
    seconds: float
    ops: int
    errors: int
    ops_per_s: float
    mean_ms: float | None  # None: no operation completed in the window
    p50_ms: float | None
    p99_ms: float | None
    writes_issued: int = 0  # including warm-up: what replication owes
    first_error: str | None = None


@dataclass
class VisibilityRow:
    origin: str
    region: str
    updates: int
    configured_ms: float
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None

    @property
    def extra_ms(self) -> float | None:
        return None if self.mean_ms is None else self.mean_ms - self.configured_ms


@dataclass
class ProtocolRun:
    protocol: str
    region: str
    phases: list[PhaseResult] = field(default_factory=list)
    visibility_probe: list[VisibilityRow] = field(default_factory=list)
    visibility_load: list[VisibilityRow] = field(default_factory=list)
    load_writes: int = 0
    missing_updates: dict[str, int] = field(default_factory=dict)

    def note_missing(self, short: dict[Pair, int]) -> None:
        """Records (and says at once) updates not visible in time: lost or very late."""
        for (origin, region), missing in short.items():
            key = f"{origin}->{region}"
            self.missing_updates[key] = self.missing_updates.get(key, 0) + missing
            say(f"[{self.protocol}] WARNING: {missing} updates from {origin} still not visible at {region} "
                f"after {DRAIN_TIMEOUT_S:g} s")  # fmt: skip

    def phase(self, system: str, op: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.system == system and p.op == op), None)

    def ratio(self, op: str) -> float | None:
        causal, raw = self.phase("causal", op), self.phase("raw", op)
        if not causal or not raw or raw.ops_per_s <= 0:
            return None
        return causal.ops_per_s / raw.ops_per_s

    def to_json(self) -> dict:
        def rows(items: list[VisibilityRow]) -> list[dict]:
            return [{**asdict(r), "extra_ms": r.extra_ms} for r in items]

        return {
            "protocol": self.protocol,
            "region": self.region,
            "throughput": [asdict(p) for p in self.phases],
            "ratios": {op: self.ratio(op) for op in OPS},
            "visibility": rows(self.visibility_probe),
            "visibility_under_load": rows(self.visibility_load),
            "load_writes": self.load_writes,
            "missing_updates": self.missing_updates,
        }


# -- closed-loop load ---------------------------------------------------------------------------
@dataclass
class _ThreadStats:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    writes: int = 0
    first_error: str | None = None


def run_closed_loop(ops: Sequence[Op], warmup: float, duration: float) -> list[_ThreadStats]:
    """Runs each op back to back in its own thread (a closed loop: one request in flight per
    client, as in the paper), for ``warmup`` unmeasured seconds then ``duration`` measured ones.

    Only operations that start and finish inside the measured window count, so the figures do
    not include connection set-up or the ramp."""
    stats = [_ThreadStats() for _ in ops]
    window = [0.0, 0.0]
    stop = threading.Event()

    def open_window() -> None:
        window[0] = time.perf_counter() + warmup
        window[1] = window[0] + duration

    barrier = threading.Barrier(len(ops) + 1, action=open_window)

    def loop(op: Op, mine: _ThreadStats) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return  # interrupted before the start
        begin, end = window
        while not stop.is_set():
            started = time.perf_counter()
            try:
                wrote = op()
            except (CausalError, redis.RedisError) as exc:
                mine.errors += started >= begin
                mine.first_error = mine.first_error or f"{type(exc).__name__}: {exc}"
                time.sleep(ERROR_PAUSE_S)  # a failing region is not hammered in a tight loop
                continue
            finished = time.perf_counter()
            mine.writes += wrote
            if started >= begin and finished <= end:
                mine.latencies.append(finished - started)
            if finished >= end:
                return

    threads = [
        threading.Thread(target=loop, args=(op, mine), daemon=True, name=f"bench-client-{i}")
        for i, (op, mine) in enumerate(zip(ops, stats, strict=True))
    ]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
        while time.perf_counter() < window[1]:
            time.sleep(min(0.2, max(0.0, window[1] - time.perf_counter())))
    finally:
        stop.set()  # on Ctrl-C too: clients finish their current call and exit
        barrier.abort()
        for thread in threads:
            thread.join(timeout=15)
    return stats


def summarize(system: str, op: str, stats: list[_ThreadStats], seconds: float) -> PhaseResult:
    latencies = sorted(x for s in stats for x in s.latencies)
    errors = [s.first_error for s in stats if s.first_error]
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    return PhaseResult(
        system=system,
        op=op,
        clients=len(stats),
        seconds=seconds,
        ops=len(latencies),
        errors=sum(s.errors for s in stats),
        ops_per_s=len(latencies) / seconds,
        mean_ms=1000 * sum(latencies) / len(latencies) if latencies else None,
        p50_ms=_ms(p50),
        p99_ms=_ms(p99),
        writes_issued=sum(s.writes for s in stats),
        first_error=errors[0] if errors else None,
    )


# -- the operations -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    group: str
    keys: int
    value: bytes

    def row(self, index: int) -> str:
        return f"bench:{index}"

    def raw_key(self, index: int) -> str:
        return f"bench-raw:{index}"  # a name the store's own keys (d:/i:/c: prefixes) never take


def causal_op(client: CausalClient, region: str, kind: str, work: Workload, seed: int, index: int) -> Op:
    """Client ``index``'s operation through the client library, with a session of its own (as one
    user of an application); the gRPC channel is shared, as an application shares its client."""
    session = client.session(region)
    rng = random.Random(seed + index)
    columns = [COLUMN]

    def op() -> bool:
        row = work.row(rng.randrange(work.keys))
        if kind == "write" or (kind == "mix" and rng.random() >= MIX_READ_FRACTION):
            session.write(work.group, row, {COLUMN: work.value})
            return True
        session.read(work.group, row, columns)
        return False

    return op


def raw_op(db: redis.Redis, kind: str, work: Workload, seed: int, index: int) -> Op:
    """The same operation done with redis-py straight against the region's Redis (the clients
    share one connection pool, as threads of an application do)."""
    rng = random.Random(seed + index)

    def op() -> bool:
        key = work.raw_key(rng.randrange(work.keys))
        if kind == "write" or (kind == "mix" and rng.random() >= MIX_READ_FRACTION):
            db.hset(key, COLUMN, work.value)
            return True
        db.hget(key, COLUMN)
        return False

    return op


def preload(client: CausalClient, db: redis.Redis, region: str, work: Workload) -> int:
    """Writes every key once both ways, so that reads find a value; returns the causal writes."""
    session = client.session(region)
    for start in range(0, work.keys, PRELOAD_BATCH):
        indexes = range(start, min(start + PRELOAD_BATCH, work.keys))
        session.batch([Mutation(work.group, work.row(i)).set(COLUMN, work.value) for i in indexes])
    pipe = db.pipeline(transaction=False)
    for i in range(work.keys):
        pipe.hset(work.raw_key(i), COLUMN, work.value)
    pipe.execute()
    return work.keys


# -- replication accounting ---------------------------------------------------------------------
def expected_visible(topology: Topology, group: str, writes_by_origin: dict[str, int]) -> dict[Pair, int]:
    """How many updates each (origin, region) pair must see: every write goes to every replica."""
    members = topology.group_members[group]
    return {
        (origin, region): count
        for origin, count in writes_by_origin.items()
        for region in members
        if region != origin and count
    }


def wait_replicated(
    topology: Topology, baseline: dict[Pair, Histogram], expected: dict[Pair, int], timeout: float
) -> tuple[dict[Pair, Histogram], dict[Pair, int]]:
    """Polls /metrics until every pair has seen what was written since ``baseline``, so that the
    histograms are complete (replication is asynchronous). Returns the snapshot and any pair
    still short at the deadline (lost or very late updates: reported, not hidden)."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot = scrape_visibility(topology)
        short = {}
        for pair, count in expected.items():
            seen = _count(snapshot.get(pair)) - _count(baseline.get(pair))
            if seen < count:
                short[pair] = int(count - seen)
        if not short or time.monotonic() > deadline:
            return snapshot, short
        time.sleep(0.2)


def _count(histogram: Histogram | None) -> float:
    return histogram.count if histogram else 0.0


def visibility_rows(
    topology: Topology, after: dict[Pair, Histogram], before: dict[Pair, Histogram], pairs: Sequence[Pair]
) -> list[VisibilityRow]:
    """Per pair, what was observed between two snapshots, next to the link's configured latency."""
    rows = []
    for origin, region in pairs:
        current = after.get((origin, region))
        delta = current.minus(before.get((origin, region))) if current else Histogram(())
        rows.append(
            VisibilityRow(
                origin=origin,
                region=region,
                updates=int(delta.count),
                configured_ms=topology.region_latency_ms(origin, region),
                mean_ms=_ms(delta.mean),
                p50_ms=_ms(delta.quantile(0.50)),
                p90_ms=_ms(delta.quantile(0.90)),
                p99_ms=_ms(delta.quantile(0.99)),
            )
        )
    return rows


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def probe_writes(client: CausalClient, region: str, work: Workload, writes: int, rate: float) -> None:
    """``writes`` rows written at ``region``, paced at ``rate``/s: open loop rather than flat out,
    so that what is measured is propagation, not a queue of the benchmark's own making."""
    session = client.session(region)
    started = time.perf_counter()
    for i in range(writes):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        session.write(work.group, f"probe:{region}:{i % work.keys}", {COLUMN: work.value})


# -- one protocol -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    clients: int
    duration: float
    warmup: float
    value_size: int
    keys: int
    group: str
    region: str
    probe_writes: int
    probe_rate: float


def say(message: str) -> None:
    print(message, flush=True)


def measure_phase(
    run: ProtocolRun, system: str, kind: str, make_op: Callable[[int], Op], settings: Settings
) -> PhaseResult:
    label = f"[{run.protocol}] {system:<6} {OP_TITLES[kind]:<7}"
    say(f"{label} {settings.clients} clients, {settings.warmup:g} s warm-up + {settings.duration:g} s ...")
    ops = [make_op(i) for i in range(settings.clients)]
    stats = run_closed_loop(ops, settings.warmup, settings.duration)
    result = summarize(system, kind, stats, settings.duration)
    errors = f", {result.errors} errors (first: {result.first_error})" if result.errors else ""
    say(
        f"{label} {result.ops_per_s:,.0f} ops/s, p50 {_num(result.p50_ms, 2)} ms, "
        f"p99 {_num(result.p99_ms, 2)} ms{errors}"
    )
    run.phases.append(result)
    return result


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
    expected = expected_visible(topology, work.group, {origin: settings.probe_writes})
    after, short = wait_replicated(topology, before, expected, DRAIN_TIMEOUT_S)
    run.note_missing(short)
    pairs = [(origin, region) for region in topology.group_members[work.group] if region != origin]
    return visibility_rows(topology, after, before, pairs)


def load_phases(
    run: ProtocolRun, client: CausalClient, db: redis.Redis, work: Workload, settings: Settings
) -> int:
    """Each operation through the client library, then raw, back to back (same machine state);
    returns how many causal writes were made (replication owes them to every other replica)."""
    for n, kind in enumerate(OPS):
        seed = 1000 * n  # the same key sequence for causal and raw
        causal = measure_phase(
            run, "causal", kind, partial(causal_op, client, run.region, kind, work, seed), settings
        )
        measure_phase(run, "raw", kind, partial(raw_op, db, kind, work, seed), settings)
        run.load_writes += causal.writes_issued
    return run.load_writes


def bench_protocol(topology: Topology, protocol: str, settings: Settings) -> ProtocolRun:
    """Every measurement against one running cluster: the load phases, then the visibility probe."""
    region, group = settings.region, settings.group
    work = Workload(group, settings.keys, b"x" * settings.value_size)
    run = ProtocolRun(protocol, region)
    members = topology.group_members[group]
    client = CausalClient.connect(topology.frontend_endpoint(region))
    db = redis.Redis(
        host=topology.host, port=topology.redis_port(region, 0), max_connections=settings.clients
    )
    try:
        say(f"[{protocol}] preloading {work.keys:,} keys ({settings.value_size}-byte values) at {region} ...")
        before = scrape_visibility(topology)  # earlier traffic (--attach) is subtracted out
        written = preload(client, db, region, work)
        start, short = wait_replicated(
            topology, before, expected_visible(topology, group, {region: written}), DRAIN_TIMEOUT_S
        )
        run.note_missing(short)

        load_writes = load_phases(run, client, db, work, settings)
        say(f"[{protocol}] waiting for the {load_writes:,} load writes to be visible at every replica ...")
        expected = expected_visible(topology, group, {region: load_writes})
        after_load, short = wait_replicated(topology, start, expected, DRAIN_TIMEOUT_S)
        run.note_missing(short)
        load_pairs = [(region, r) for r in members if r != region]
        run.visibility_load = visibility_rows(topology, after_load, start, load_pairs)

        for origin in members:
            run.visibility_probe += probe_visibility(run, topology, client, work, origin, settings)
    finally:
        client.close()
        db.close()
    return run


# -- the cluster --------------------------------------------------------------------------------
class BenchError(RuntimeError):
    """The benchmark cannot run as asked; the message says why."""


def with_overrides(topology: Topology, **overrides: object) -> Topology:
    return Topology.from_dict({**topology.model_dump(), **overrides}, source=topology.source)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


def find_base_port(topology: Topology) -> int:
    """A base port where every port of the topology is free. Searched away from the topology's
    own ports (someone may be running it by hand) and from the test suite's blocks (20000-40000),
    with a per-process offset so that two benchmarks started together do not pick the same."""
    for base in range(41000 + (os.getpid() % 40) * 400, 60001, 200):
        candidate = with_overrides(topology, base_port=base)
        if all(_port_free(candidate.host, port) for _, port in candidate.all_ports()):
            return base
    raise BenchError("no free block of ports between 41000 and 60000; pass --base-port")


def running_protocol(topology: Topology, region: str) -> str:
    """The protocol of the cluster already running at the topology's ports (for --attach)."""
    with CausalClient.connect(topology.frontend_endpoint(region)) as client:
        reply = client.stub(region).Describe(store_pb2.DescribeRequest(), timeout=client.timeout)
    return reply.protocol


@contextlib.contextmanager
def started(topology: Topology, run_dir: Path) -> Iterator[None]:
    """Runs the topology with the project's launcher for the duration of the block; stops every
    process on the way out, whatever happens (Ctrl-C and failures included)."""
    cluster = Cluster(topology, run_dir)
    say(
        f"[{topology.protocol}] starting {topology.name} with ports from {topology.base_port} "
        f"(logs in {cluster.run_dir / 'logs'}) ..."
    )
    began = time.monotonic()
    cluster.start()  # stops what it started if it fails
    try:
        elapsed = time.monotonic() - began
        say(f"[{topology.protocol}] {len(cluster.processes)} processes healthy in {elapsed:.1f} s")
        yield
    finally:
        say(f"[{topology.protocol}] stopping the cluster ...")
        cluster.stop()


def run_protocol(
    args: argparse.Namespace, topology: Topology, protocol: str | None, settings: Settings
) -> ProtocolRun:
    """One protocol: a cluster of its own (or the attached one), measured."""
    if args.attach:
        actual = running_protocol(topology, settings.region)
        if protocol not in (None, actual):
            raise BenchError(f"--attach: the running cluster runs {actual!r}, not {protocol!r}")
        say(f"[{actual}] attached to {topology.name} at {topology.frontend_endpoint(settings.region)}")
        return bench_protocol(topology, actual, settings)
    assert protocol is not None
    configured = with_overrides(
        topology, protocol=protocol, base_port=args.base_port or find_base_port(topology)
    )
    with started(configured, Path(args.out) / f"run-{protocol}"):
        return bench_protocol(configured, protocol, settings)


# -- reporting ----------------------------------------------------------------------------------
def render_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain text, first column left-aligned, the others right-aligned (numbers line up)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([title, line(headers), rule, *(line(r) for r in rows)])


def _num(value: float | None, digits: int = 1, sign: bool = False) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def throughput_table(run: ProtocolRun, settings: Settings) -> str:
    title = (
        f"Throughput and latency, protocol {run.protocol}: {settings.clients} closed-loop clients at "
        f"{run.region}, {settings.duration:g} s per phase, {settings.value_size}-byte values, "
        f"{settings.keys:,} keys, {os.cpu_count()} CPUs"
    )
    headers = ["op", "causal ops/s", "p50 ms", "p99 ms", "raw ops/s", "p50 ms", "p99 ms", "causal/raw"]
    rows = []
    for op in OPS:
        causal, raw = run.phase("causal", op), run.phase("raw", op)
        if not causal or not raw:
            continue
        rows.append([
            OP_TITLES[op],
            _num(causal.ops_per_s, 0), _num(causal.p50_ms, 2), _num(causal.p99_ms, 2),
            _num(raw.ops_per_s, 0), _num(raw.p50_ms, 2), _num(raw.p99_ms, 2),
            _num(run.ratio(op), 3),
        ])  # fmt: skip
    table = render_table(title, headers, rows)
    errors = [f"{p.system} {OP_TITLES[p.op]}: {p.errors} ({p.first_error})" for p in run.phases if p.errors]
    return table + ("\nerrors: " + "; ".join(errors) if errors else "")


def visibility_table(title: str, rows: Sequence[VisibilityRow]) -> str:
    headers = [
        "origin -> region",
        "updates",
        "configured ms",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "extra ms",
    ]
    cells = [
        [
            f"{r.origin} -> {r.region}", f"{r.updates:,}", _num(r.configured_ms), _num(r.mean_ms),
            _num(r.p50_ms), _num(r.p90_ms), _num(r.p99_ms), _num(r.extra_ms, sign=True),
        ]
        for r in rows
    ]  # fmt: skip
    return render_table(title, headers, cells)


def report(run: ProtocolRun, settings: Settings) -> str:
    """The tables of one protocol, as printed (and as they go into the README)."""
    probe = visibility_table(
        f"Remote-update visibility, protocol {run.protocol}: {settings.probe_writes} writes paced at "
        f"{settings.probe_rate:g}/s from each region in turn (extra = mean - configured one-way latency; "
        f"percentiles interpolated in histogram buckets)",
        run.visibility_probe,
    )
    load = visibility_table(
        f"Remote-update visibility during the load phases, protocol {run.protocol}: "
        f"{run.load_writes:,} closed-loop writes from {run.region}",
        run.visibility_load,
    )
    return "\n\n".join([throughput_table(run, settings), probe, load])


def results_json(
    topology: Topology, settings: Settings, runs: Sequence[ProtocolRun], errors: dict[str, str]
) -> dict:
    return {
        "topology": topology.name,
        "topology_file": topology.source,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": asdict(settings),
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "runs": [run.to_json() for run in runs],
        "errors": errors,
    }


def write_outputs(out: Path, results: dict) -> list[Path]:
    """The JSON always; the PNG when matplotlib is installed (the ``bench`` extra)."""
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{results['topology']}.json"
    json_path.write_text(json.dumps(results, indent=2, allow_nan=False) + "\n")
    paths = [json_path]
    if results["runs"]:
        try:
            from loadtest.plots import plot_results
        except ImportError as exc:
            say(f"no plot: {exc} (pip install -e '.[bench]')")
        else:
            paths.append(plot_results(results, out / f"{results['topology']}.png"))
    return paths


# -- command line -------------------------------------------------------------------------------
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
    add("--protocols", help="comma-separated, one run each (default: the topology's protocol)")
    add("--region", help="where the load clients attach (default: the topology's first region)")
    add("--group", default="all", help="replication group written (default: all)")
    add(
        "--probe-writes",
        type=_positive(int),
        default=300,
        help="visibility probe writes per region (default: 300)",
    )
    add("--probe-rate", type=_positive(float), default=100.0, help="visibility probe writes/s (default: 100)")
    add("--base-port", type=int, help="first port of the started cluster (default: a free block)")
    add("--attach", action="store_true", help="measure the cluster already running at the topology's ports")
    add("--out", default="bench-results", help="where results and cluster logs go (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
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
        probe_rate=args.probe_rate,
    )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        topology = Topology.load(args.topology)
        if args.base_port:
            topology = with_overrides(topology, base_port=args.base_port)
        settings = settings_for(args, topology)
        protocols: list[str | None] = [p.strip() for p in (args.protocols or "").split(",") if p.strip()]
        for protocol in protocols:
            with_overrides(topology, protocol=protocol)  # an unknown name fails here, before any start
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
    try:
        for protocol in protocols:
            try:
                runs.append(run_protocol(args, topology, protocol, settings))
            except (BenchError, LaunchError, RedisNotFound, CausalError, redis.RedisError, OSError) as exc:
                errors[protocol or "running"] = str(exc)
                say(f"[{protocol or 'running'}] FAILED: {exc}")
    except KeyboardInterrupt:
        say("interrupted: everything started was stopped; no results written")
        return 130

    for run in runs:
        say("\n" + report(run, settings))
    for path in write_outputs(Path(args.out), results_json(topology, settings, runs, errors)):
        say(f"wrote {path}")
    if errors:
        # The last line of a launch failure is the service's own exception: the part worth repeating.
        say("failed: " + "; ".join(f"{p}: {e.strip().splitlines()[-1]}" for p, e in errors.items()))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
