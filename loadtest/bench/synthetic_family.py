"""The paper's synthetic workload (§7.3.2, its Fig. 5): closed-loop clients at every region read
and write rows of *buckets*, a bucket being one set of regions that replicate it.

Each operation draws its bucket afresh, as the authors' benchmark driver does: the client's own
region plus each other region, taken in order of distance (1 = the closest), with the
probability the *correlation* gives it:

- ``exponential``: 1/2^k (50 %, 25 %, 12.5 %, ...): a strongly partial setting, where distant
  regions share little;
- ``proportional``: (N - k)/N for N regions (with 7: 86 %, 71 %, ..., 14 %): a smoother one;
- ``uniform``: 1/2 for every region (every bucket that holds the client's region equally likely);
- ``full``: every region (full replication).

So every non-empty set of regions is a bucket: ``write_topology`` adds one replication group per
set (127 for seven regions), named ``syn.`` + its regions. A *remote read* (a share of the
reads) draws a bucket the same way from the other regions only (drawn again while empty) and
reads it where it is closest: the session migrates there, reads, and migrates back home, the
attach the paper describes for GentleRain and Cure ("the receiving datacenter only returns to the
client when the stable time is equal or larger than the client's timestamp"), and Saturn's
migration label. Under ``full`` nothing is remote, so a remote read is a local one.

The authors' driver rounds the probabilities to whole percents (``trunc``); this one uses them
exactly. Rows: ``KEYS_PER_BUCKET`` per bucket, column ``v``, preloaded with the point's value
size (``preload``) so that reads return values of that size.

Fig. 1b's *replication degree* d replaces the draw: a bucket is the client's region and its d - 1
closest others (``Mix.replicas``), "until only datacenters close to each other replicate the same
data".

The synthetic family's library: Fig. 5, Fig. 7, Fig. 1 and the sink's placement run this
workload; ``python -m loadtest bench synthetic`` (synthetic.py) writes its traffic per pair for
the configuration generator.
"""

from __future__ import annotations

import functools
import itertools
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from causal_client import CausalClient, Mutation
from loadtest.harness.cluster import client_at_site, clients_at_sites, find_base_port, started, with_overrides
from loadtest.harness.cpu import CLIENT_ROLE, CpuByProcess, CpuMeter, by_role, used_between
from loadtest.harness.loop import Op, run_closed_loop
from loadtest.harness.loop_processes import run_closed_loop_in_processes
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.probes import extra, merged
from loadtest.harness.report import num, say
from loadtest.harness.stats import to_ms
from loadtest.harness.visibility import DRAIN_TIMEOUT_S, wait_replicated
from loadtest.workload import topology_file
from services.configure.inputs import generate
from services.topology import Topology

CORRELATIONS = ("exponential", "proportional", "uniform", "full")
GROUP_PREFIX = "syn"
KEYS_PER_BUCKET = 50
TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region-mx.toml"  # Fig. 5's
COLUMN = "v"


@dataclass(frozen=True)
class Mix:
    """One point of the workload space; the defaults are the paper's."""

    value_bytes: int = 2
    read_fraction: float = 0.9
    correlation: str = "exponential"
    remote_read_fraction: float = 0.0  # of the reads
    replicas: int = 0  # 0: the correlation draws each bucket; d: home and its d - 1 closest regions

    def __post_init__(self) -> None:
        if self.correlation not in CORRELATIONS:
            raise ValueError(f"correlation {self.correlation!r}: one of {', '.join(CORRELATIONS)}")
        if self.replicas < 0:
            raise ValueError("replicas must be 0 (the correlation decides) or a replication degree")
        if not (0 <= self.read_fraction <= 1 and 0 <= self.remote_read_fraction <= 1):
            raise ValueError("read_fraction and remote_read_fraction are fractions (0 to 1)")
        if self.value_bytes < 1:
            raise ValueError("value_bytes must be at least 1")

    @property
    def name(self) -> str:
        reads = round(100 * self.read_fraction)
        remote = round(100 * self.remote_read_fraction)
        spread = f"{self.replicas} closest replicas" if self.replicas else self.correlation
        return f"{self.value_bytes} B, {reads}:{100 - reads}, {spread}, {remote} % remote"


def inclusion(correlation: str, rank: int, regions: int) -> float:
    """The probability that the ``rank``-th closest other region (1 = the closest) replicates a
    bucket a client draws, among ``regions`` regions in all."""
    match correlation:
        case "exponential":
            return 2.0**-rank
        case "proportional":
            return (regions - rank) / regions
        case "uniform":
            return 0.5
        case "full":
            return 1.0
    raise ValueError(f"correlation {correlation!r}: one of {', '.join(CORRELATIONS)}")


class Buckets:
    """The topology's regions, each one's others by distance, and every bucket's group."""

    def __init__(self, topology: Topology):
        self.regions = tuple(topology.region_names)
        self.others = {
            r: sorted(
                (o for o in self.regions if o != r),
                key=functools.partial(_nearest_first, topology, self.regions, r),
            )
            for r in self.regions
        }

    def group(self, members: Sequence[str]) -> str:
        return topology_file.group_name(self.regions, members, GROUP_PREFIX)

    def groups(self) -> dict[str, list[str]]:
        """Every non-empty set of regions, as a replication group (members in topology order)."""
        found = {}
        for size in range(1, len(self.regions) + 1):
            for members in itertools.combinations(self.regions, size):
                found[self.group(members)] = list(members)
        return found

    def _draw(self, region: str, correlation: str, rng: random.Random) -> list[str]:
        n = len(self.regions)
        return [
            o for k, o in enumerate(self.others[region], 1) if rng.random() < inclusion(correlation, k, n)
        ]

    def local(self, region: str, correlation: str, rng: random.Random, replicas: int = 0) -> str:
        """A bucket replicated at ``region``: drawn by ``correlation``, or with ``replicas``, the
        region and its ``replicas - 1`` closest others."""
        if replicas:
            return self.group([region, *self.others[region][: replicas - 1]])
        return self.group([region, *self._draw(region, correlation, rng)])

    def remote(self, region: str, correlation: str, rng: random.Random) -> tuple[str, str] | None:
        """A bucket not replicated at ``region`` and the closest region that replicates it; None
        under full replication (nothing is remote)."""
        if correlation == "full":
            return None
        while not (members := self._draw(region, correlation, rng)):
            pass
        return self.group(members), members[0]  # drawn in order of distance


def write_topology(base: Topology, out_path: str | Path) -> Path:
    """``base`` plus one group per bucket (every non-empty set of its regions)."""
    groups = Buckets(base).groups()
    about = f"one replication group per bucket of the synthetic workload ({len(groups)} groups)."
    return topology_file.write_with_groups(base, groups, out_path, f"{base.name}-synthetic", about)


def row(rng: random.Random) -> str:
    return f"k{rng.randrange(KEYS_PER_BUCKET)}"


def client_op(client: CausalClient, home: str, buckets: Buckets, mix: Mix, seed: int) -> Op:
    """One closed-loop client at ``home`` (``client`` runs at home's site), with its own session."""
    session = client.session(home)
    rng = random.Random(seed)
    value = b"x" * mix.value_bytes
    columns = [COLUMN]

    def op() -> bool:
        if rng.random() >= mix.read_fraction:
            session.write(buckets.local(home, mix.correlation, rng, mix.replicas), row(rng), {COLUMN: value})
            return True
        remote = (
            buckets.remote(home, mix.correlation, rng) if rng.random() < mix.remote_read_fraction else None
        )
        if remote is None:
            session.read(buckets.local(home, mix.correlation, rng, mix.replicas), row(rng), columns)
            return False
        group, closest = remote
        session.migrate(closest)
        try:
            session.read(group, row(rng), columns)
        finally:
            session.migrate(home)
        return False

    return op


def preload(clients: Mapping[str, CausalClient], buckets: Buckets, value_bytes: int) -> dict[Pair, int]:
    """Every row of every bucket written once, at the bucket's first region, with values of
    ``value_bytes``; returns how many updates each (origin, region) pair must see."""
    value = b"x" * value_bytes
    sessions = {region: client.session(region) for region, client in clients.items()}
    expected: Counter[Pair] = Counter()
    for group, members in buckets.groups().items():
        origin = members[0]
        rows = [Mutation(group, f"k{i}").set(COLUMN, value) for i in range(KEYS_PER_BUCKET)]
        sessions[origin].batch(rows, atomic=False)  # one update per row: counted so
        for region in members[1:]:
            expected[origin, region] += KEYS_PER_BUCKET
    return dict(expected)


def preload_replicated(
    label: str, topology: Topology, clients: Mapping[str, CausalClient], buckets: Buckets, size: int
) -> None:
    """``preload``, then waits until every update reached every replica before anything is
    measured (else the first point would count the preload's replication in its visibility)."""
    began = time.monotonic()
    before = scrape_visibility(topology)
    expected = preload(clients, buckets, size)
    _, short = wait_replicated(topology, before, expected, DRAIN_TIMEOUT_S)
    rows = sum(expected.values())
    say(
        f"[{label}]   preloaded rows of {size} B and replicated {rows:,} updates in "
        f"{time.monotonic() - began:.1f} s" + (f"; still missing: {short}" if short else "")
    )


@dataclass
class Point:
    protocol: str
    round: int
    value_bytes: int
    read_fraction: float
    correlation: str
    remote_read_fraction: float
    ops: int
    ops_per_s: float
    writes: int
    errors: int
    first_error: str | None
    remote_updates: int  # made visible at another region inside the window
    over_bulk_ms: float | None  # their mean visibility minus the bulk link's latency
    cpu_us_per_op: float | None  # the cluster's processes (not the clients)
    cpu_us_by_role: dict[str, float] = field(default_factory=dict)
    replicas: int = 0  # Mix.replicas (Fig. 1b's replication degree)
    visibility_ms: float | None = None  # the remote updates' mean visibility
    clients_cpu_us_per_op: float | None = None  # the bench's clients (are they the ceiling?)

    @property
    def regions_cpu_us_per_op(self) -> float | None:
        """Without the serializers: what the regions' own machines would spend on the paper's
        testbed, where serializers ran on machines of their own."""
        if self.cpu_us_per_op is None:
            return None
        return self.cpu_us_per_op - self.cpu_us_by_role.get("serializer", 0.0)

    @property
    def mix(self) -> Mix:
        return Mix(
            self.value_bytes, self.read_fraction, self.correlation, self.remote_read_fraction, self.replicas
        )


@dataclass(frozen=True)
class Settings:
    clients: int  # per region
    warmup: float
    duration: float
    processes: int = 1  # client processes (threads of one process share one core's worth of work)


@dataclass(frozen=True)
class SyntheticClients:
    """One point's closed-loop clients, dealt over ``processes`` client processes: the
    ``index``-th builds every ``processes``-th client with its own connections, and the same
    seeds as one process would, so the workload is the same however it is spread."""

    topology: Topology
    mix: Mix
    per_region: int
    processes: int

    def __call__(self, index: int) -> list[Op]:
        buckets = Buckets(self.topology)
        clients: dict[str, CausalClient] = {}
        ops = []
        for k, (r, region, c) in enumerate(_client_seats(self.topology, self.per_region)):
            if k % self.processes != index:
                continue
            if region not in clients:
                clients[region] = client_at_site(self.topology, region)
            ops.append(client_op(clients[region], region, buckets, self.mix, seed=1000 * r + c))
        return ops


def _client_seats(topology: Topology, per_region: int) -> list[tuple[int, str, int]]:
    """(region's index, region, client's index in it) for every client of a point."""
    return [(r, region, c) for r, region in enumerate(topology.region_names) for c in range(per_region)]


def measure_protocol(
    protocol: str, topology_file: Path, mixes: list[Mix], settings: Settings, run_dir: Path, round_: int
) -> list[Point]:
    """Every point on one fresh cluster of ``protocol``."""
    topology = with_overrides(Topology.load(topology_file), protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    buckets = Buckets(topology)
    points = []
    with started(topology, run_dir) as cluster, clients_at_sites(cluster.topology) as clients:
        running = cluster.topology
        meter = CpuMeter({name: r.popen.pid for name, r in cluster.processes.items()})
        size = None
        for i, mix in enumerate(mixes, 1):
            if mix.value_bytes != size:
                size = mix.value_bytes
                preload_replicated(protocol, running, clients, buckets, size)
            points.append(_measure_point(protocol, running, clients, buckets, mix, settings, meter, round_))
            p = points[-1]
            say(
                f"[{protocol}] [{i}/{len(mixes)}] {mix.name}: {p.ops_per_s:,.0f} ops/s, "
                f"visibility over bulk {num(p.over_bulk_ms)} ms, {num(p.cpu_us_per_op, 0)} µs CPU/op"
                f" (clients {num(p.clients_cpu_us_per_op, 0)})"
                + (f", {p.errors} errors ({p.first_error})" if p.errors else "")
            )
    return points


def _measure_point(
    protocol: str,
    topology: Topology,
    clients: dict[str, CausalClient],
    buckets: Buckets,
    mix: Mix,
    settings: Settings,
    meter: CpuMeter,
    round_: int,
) -> Point:
    cpu_at: dict[str, CpuByProcess] = {}
    # The visibility histograms are read before the clients start and after they stop, not at the
    # window's edges: a scrape costs every region's metrics process (and this one) up to a second
    # of CPU under Saturn, which taken inside a 3 s window cost Saturn a quarter of its throughput
    # and hid the CPU of the window's first seconds. Visibility then counts the warm-up's updates
    # too, and every update of the window however late it arrives.
    seen_then = scrape_visibility(topology)
    at_edge = lambda edge: cpu_at.update({edge: meter.snapshot()})  # noqa: E731
    if settings.processes > 1:
        factory = SyntheticClients(topology, mix, settings.clients, settings.processes)
        stats = run_closed_loop_in_processes(
            factory, settings.processes, settings.warmup, settings.duration, at_edge
        )
    else:
        ops = [
            client_op(clients[region], region, buckets, mix, seed=1000 * r + c)
            for r, region, c in _client_seats(topology, settings.clients)
        ]
        stats = run_closed_loop(ops, settings.warmup, settings.duration, at_edge)
    seen_now = scrape_visibility(topology)
    cpu_then, cpu_now = cpu_at["open"], cpu_at["close"]
    remote_updates, over_bulk = extra(topology, seen_now, seen_then)
    visible = merged(seen_now, seen_then)
    cpu = used_between(cpu_then, cpu_now)
    clients_cpu = cpu.pop(CLIENT_ROLE, None)
    done = sum(len(s.latencies) for s in stats)
    errors = [s.first_error for s in stats if s.first_error]
    return Point(
        protocol=protocol,
        round=round_,
        value_bytes=mix.value_bytes,
        read_fraction=mix.read_fraction,
        correlation=mix.correlation,
        remote_read_fraction=mix.remote_read_fraction,
        ops=done,
        ops_per_s=done / settings.duration,
        writes=sum(s.writes for s in stats),
        errors=sum(s.errors for s in stats),
        first_error=errors[0] if errors else None,
        remote_updates=remote_updates,
        over_bulk_ms=over_bulk,
        cpu_us_per_op=1e6 * sum(cpu.values()) / done if done else None,
        cpu_us_by_role={role: 1e6 * s / done for role, s in by_role(cpu).items()} if done else {},
        replicas=mix.replicas,
        visibility_ms=to_ms(visible.mean),
        clients_cpu_us_per_op=1e6 * clients_cpu / done if done and clients_cpu is not None else None,
    )


# -- reading the points ---------------------------------------------------------------------------
def first_regions(base: Topology, n: int, out: Path) -> Path:
    """``base``'s first ``n`` regions (their latencies only) with the tree the generator makes
    for them, and the synthetic workload's groups, written to ``out``."""
    regions = base.regions[:n]
    sites = {r.site for r in regions}
    data = base.model_dump(exclude_defaults=True, exclude_none=True)
    data.update(
        name=out.stem,
        protocol="eventual",
        regions=[r.model_dump(exclude_defaults=True, exclude_none=True) for r in regions],
        latency_ms={a: {b: ms for b, ms in row.items() if b in sites} for a, row in base.latency_ms.items()
                    if a in sites},
        groups={"all": ["*"]},
    )  # fmt: skip
    for key in ("serializers", "tree"):
        data.pop(key, None)
    config, mismatch = generate(Topology.from_dict(data, source=str(out)))
    say(
        f"  {n} datacenters: a generated tree of {len(config.serializers)} serializers "
        f"({mismatch:.1f} ms mean mismatch)"
    )
    subset = Topology.from_dict({**data, **config.topology_fields()}, source=str(out))
    return write_topology(subset, out)


def _nearest_first(topology: Topology, regions: tuple[str, ...], here: str, other: str) -> tuple[float, int]:
    """A sort key: ``other``'s latency from ``here``, then its place in the topology."""
    return topology.region_latency_ms(here, other), regions.index(other)
