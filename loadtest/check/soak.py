"""A long checked run in one command: ``python -m loadtest soak --ops N``.

Every protocol (``eventual`` as the control whose anomalies must be found) on four kinds of
topology (full and partial replication, each on standalone stores of two shards and on Redis
Cluster stores of three masters with a replica each), with strong sessions in both strong modes
(the legs alternate them), under every nemesis in turn. A **leg** is one protocol on one kind:
one cluster, started once. Its **segments** run one after another on it, one nemesis each, each
with keys and registers of its own, so every segment is an independent history: the sessions run
until the segment has its share of the N operations (of what is left, by its kind's measured
rate: ``Shares``) and its fault was done, every fault is
healed, the replicas are read until they agree, and the history is written to disk
(``segments/NNN.jsonl.gz``, checked again by ``bench checker --history``; the strong
operations beside it, ``NNN.strong.pickle.gz``) and checked as the segment ends. What is kept
in memory is one segment's history (its share is at most ``MAX_SEGMENT_OPS`` operations, and
it runs over only while its fault is under way, never past twice its planned time; more
operations make more rounds of the legs, not longer segments) and a row per segment.

A protocol meets each nemesis on one of its legs: the faults that need a cluster store (a master
killed, a shard moved) on the cluster legs, the rest dealt round the four legs, shifted by one
for each protocol, so that every fault meets every kind of topology across the protocols.

The end is one table, protocol by nemesis (operations, anomalies by kind, fractured reads, lost
and doubled writes, strong operations, not linearizable, undecided) and ``soak.json``. Ctrl-C
ends the segment under way, checks what it recorded, and reports what was checked so far (exit
status 130). Passing: no anomaly, fractured read, lost or doubled write, untyped error or
non-linearizable or undecided strong history under any causal protocol; under ``eventual``
nothing lost or doubled, and anomalies found (else the instrument is blind: exit status 1).
"""

from __future__ import annotations

import json
import resource
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from loadtest.check.causal import PATTERNS
from loadtest.check.nemesis import CLUSTER_STORE_FAULTS, FAULTS, OUTAGE_S
from loadtest.check.run import CheckSettings, checked_cluster, checked_run, passed, topology_for
from services.launcher.cluster import Cluster
from services.topology import Topology
from services.traits import traits_of

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ("saturn", "c3", "gentlerain", "cure", "eventual")
CONTROL = "eventual"
KINDS = {  # name → (topology file, Redis Cluster store or standalone shards)
    "full/standalone": ("causality-3region.toml", False),
    "partial/standalone": ("demo-3region-partial.toml", False),
    "full/cluster": ("causality-3region.toml", True),
    "partial/cluster": ("demo-3region-partial.toml", True),
}
STRONG_MODES = ("vivace", "token")
SHARDS = 2  # standalone stores: two shards a region (a slow shard has others beside it)
CLUSTER_STORE = (3, 1)  # masters, replicas each: a master's failover needs three
BANDWIDTH_MBIT = 100.0  # for the congestion fault, which floods a link of limited bandwidth
TREE_FAULTS = ("serializer", "sink")  # only where the protocol has a tree
MAX_SEGMENT_OPS = 50_000
MIN_SEGMENT_OPS = 1_000
OPS_PER_S_GUESS = 300.0  # a segment may run twice as long as this rate would need, at least 40 s
RATE_PRIOR = {False: 2.0, True: 1.0}  # standalone, cluster store: relative rates until measured


@dataclass(frozen=True)
class Leg:
    protocol: str
    kind: str
    strong_mode: str
    nemeses: tuple[str, ...]


@dataclass
class SegmentRow:
    """One segment's result (the table sums them by protocol and nemesis)."""

    protocol: str
    kind: str
    nemesis: str
    strong_mode: str
    operations: int
    anomalies: dict[str, int]
    fractured: int
    lost: int
    doubled: int
    strong_operations: int
    not_linearizable: int
    undecided: int
    converged: bool
    untyped_errors: int
    nemesis_errors: list[str]
    seconds: float
    history: str  # the file it was written to
    effects: list[dict]  # what its fault cost (report.fault_effects)
    outages: list[dict]  # region-outage: the others' throughput, the catch-up (report.outage_effects)
    phases: dict[str, float]  # where its seconds went (run.Phases)
    applied: list[str]  # the faults done (not those the nemesis failed to do)
    failed_calls: int  # calls that failed, typed: a fault the clients did not feel did nothing

    @staticmethod
    def of(leg: Leg, nemesis: str, data: dict, seconds: float, history: Path) -> SegmentRow:
        linear = data.get("linearizability", {})
        return SegmentRow(
            leg.protocol, leg.kind, nemesis, leg.strong_mode, data["operations"], data["violations"],
            data["fractured_reads"], len(data["lost_writes"]) + data["lost_increments"],
            data["doubled_increments"], data.get("strong_operations", 0), linear.get("violations", 0),
            linear.get("undecided", 0), data["converged"], len(data.get("untyped_errors", [])),
            data.get("nemesis_errors", []), seconds, str(history), data.get("fault_effects", []),
            data.get("outages", []), data.get("phase_seconds", {}),
            [f["fault"] for f in data.get("faults", []) if not f["note"].startswith("failed")],
            sum(data.get("errors", {}).values()),
        )  # fmt: skip

    @property
    def clean(self) -> bool:
        """Nothing wrong, anomalies aside (the control's are expected)."""
        return (
            self.fractured == 0 and self.lost == 0 and self.doubled == 0 and self.converged
            and self.not_linearizable == 0 and self.undecided == 0 and self.untyped_errors == 0
        )  # fmt: skip


def legs(nemeses: tuple[str, ...] = FAULTS, protocols: tuple[str, ...] = PROTOCOLS) -> list[Leg]:
    """Each protocol on each kind, every nemesis on one of a protocol's legs (module doc)."""
    kinds = list(KINDS)
    cluster_kinds = [k for k in kinds if KINDS[k][1]]
    found = []
    for shift, protocol in enumerate(protocols):
        dealt: dict[str, list[str]] = {k: [] for k in kinds}
        others = [n for n in nemeses if n not in CLUSTER_STORE_FAULTS and applies(n, protocol)]
        for i, nemesis in enumerate(n for n in nemeses if n in CLUSTER_STORE_FAULTS):
            dealt[cluster_kinds[(i + shift) % len(cluster_kinds)]].append(nemesis)
        for i, nemesis in enumerate(others):
            dealt[kinds[(i + shift) % len(kinds)]].append(nemesis)
        for i, kind in enumerate(kinds):
            if dealt[kind]:
                mode = STRONG_MODES[(i + shift) % len(STRONG_MODES)]
                found.append(Leg(protocol, kind, mode, tuple(dealt[kind])))
    return found


def applies(nemesis: str, protocol: str) -> bool:
    """Whether the protocol has what the nemesis hits (a tree's serializers and label sinks)."""
    return traits_of(protocol).tree or nemesis not in TREE_FAULTS


class Shares:
    """Each segment's share of the operations still to check, in proportion to the rate its kind
    of topology checks them at, so that the segments take about as long each: a kind that runs
    slower (the cluster stores, 18 Redis processes on the same cores) gets fewer operations
    rather than more time. The rates are measured on the segments run so far (operations per
    second of sessions), a prior until a kind has run; what a segment ran over its share (one
    whose fault takes long, a region gone for a minute) comes off the later ones."""

    def __init__(self, ops: int, kinds: list[str]):
        self.ops, self.left = ops, list(kinds)  # the segments still to run, by kind
        self.measured: dict[str, tuple[int, float]] = {}  # kind → (operations, seconds)

    def rate(self, kind: str) -> float:
        ops, seconds = self.measured.get(kind, (0, 0.0))
        if seconds > 0 and ops > 0:
            return ops / seconds
        store = KINDS[kind][1]  # a kind not run yet: from a measured one, scaled by the prior
        known = [(KINDS[k][1], o / s) for k, (o, s) in self.measured.items() if s > 0 and o > 0]
        if known:
            other_store, other_rate = known[0]
            return other_rate * RATE_PRIOR[store] / RATE_PRIOR[other_store]
        return OPS_PER_S_GUESS * RATE_PRIOR[store]

    def next(self, kind: str, checked: int) -> int:
        """The share of the segment about to run on ``kind``, ``checked`` operations so far."""
        weight = sum(self.rate(k) for k in self.left) or 1.0
        share = (self.ops - checked) * self.rate(kind) / weight
        self.left.remove(kind)
        return int(min(MAX_SEGMENT_OPS, max(MIN_SEGMENT_OPS, share)))

    def ran(self, kind: str, ops: int, seconds: float) -> None:
        before = self.measured.get(kind, (0, 0.0))
        self.measured[kind] = (before[0] + ops, before[1] + seconds)


@dataclass
class Soak:
    ops: int
    out: Path
    nemeses: tuple[str, ...] = FAULTS
    protocols: tuple[str, ...] = PROTOCOLS
    sessions: int = 12
    strong_sessions: int = 4
    seed: int = 1
    outage_s: float = OUTAGE_S
    rows: list[SegmentRow] = field(default_factory=list)
    overhead_s: dict[str, float] = field(default_factory=dict)  # starting and stopping the legs' clusters
    interrupted: threading.Event = field(default_factory=threading.Event)

    def plan(self) -> tuple[list[Leg], int, int]:
        """The legs, the rounds of them, and each segment's operations (causal and strong: the
        soak's N counts both, as its table does)."""
        planned = legs(self.nemeses, self.protocols)
        segments = sum(len(leg.nemeses) for leg in planned)
        rounds = max(1, -(-self.ops // (segments * MAX_SEGMENT_OPS)))
        share = max(MIN_SEGMENT_OPS, -(-self.ops // (segments * rounds)))
        return planned, rounds, share

    def run(self, say: Callable[[str], None]) -> int:
        planned, rounds, share = self.plan()
        kinds = [leg.kind for _ in range(rounds) for leg in planned for _ in leg.nemeses]
        shares = Shares(self.ops, kinds)
        times = f" x {rounds} rounds" if rounds > 1 else ""
        say(f"soak: {self.ops:,} operations in {len(kinds)} segments of ~{share:,}, fewer on the slower "
            f"kinds ({len(planned)} legs{times}); histories in {self.out / 'segments'}")  # fmt: skip
        (self.out / "segments").mkdir(parents=True, exist_ok=True)
        previous = signal.signal(signal.SIGINT, lambda *_: self.stop(say))
        bar = tqdm(total=self.ops, unit="op", unit_scale=True, dynamic_ncols=True, mininterval=2.0)
        try:
            for turn in range(rounds):
                for leg in planned:
                    if self.done:
                        break
                    self.run_leg(leg, shares, turn, bar)
        finally:
            bar.close()
            signal.signal(signal.SIGINT, previous)
        print(table(self.rows), flush=True)
        say(time_spent(self.rows, self.overhead_s))
        say(f"the soak's process (sessions and checkers) peaked at {peak_mb():,.0f} MB")
        for path in self.write():
            say(f"wrote {path}")
        return 130 if self.interrupted.is_set() else verdict(self.rows, say)

    @property
    def done(self) -> bool:
        """Interrupted (every planned segment runs otherwise: each nemesis at least once)."""
        return self.interrupted.is_set()

    @property
    def checked(self) -> int:
        """Operations checked: the causal sessions' and the strong ones'."""
        return sum(r.operations + r.strong_operations for r in self.rows)

    def stop(self, say: Callable[[str], None]) -> None:
        if not self.interrupted.is_set():
            say("\nsoak: interrupted; ending this segment and checking what it recorded ...")
        self.interrupted.set()

    def run_leg(self, leg: Leg, shares: Shares, turn: int, bar: tqdm) -> None:
        topology_file, cluster_store = KINDS[leg.kind]
        settings = CheckSettings(
            topology=ROOT / "topologies" / topology_file, protocol=leg.protocol, sessions=self.sessions,
            shards=CLUSTER_STORE[0] if cluster_store else SHARDS,  # a cluster: a shard per master
            cluster_store=CLUSTER_STORE if cluster_store else None,
            bandwidth_mbit=BANDWIDTH_MBIT if "congestion" in leg.nemeses else None,
            strong_sessions=self.strong_sessions, strong_mode=leg.strong_mode,
            interrupted=self.interrupted, quiet=True,
            seed=self.seed + turn, out=self.out, outage_s=self.outage_s,
        )  # fmt: skip
        topology = topology_for(settings)
        bar.set_description(f"{leg.protocol} {leg.kind}: starting")
        began = time.monotonic()
        with checked_cluster(topology, self.out, lambda line: None) as cluster:
            self._spent("starting clusters", began)
            for nemesis in leg.nemeses:
                if self.done:
                    break
                self.run_segment(leg, nemesis, settings, topology, cluster, bar, shares)
            began = time.monotonic()
        self._spent("stopping clusters", began)

    def _spent(self, what: str, since: float) -> None:
        self.overhead_s[what] = round(self.overhead_s.get(what, 0.0) + time.monotonic() - since, 1)

    def run_segment(
        self,
        leg: Leg,
        nemesis: str,
        settings: CheckSettings,
        topology: Topology,
        cluster: Cluster,
        bar: tqdm,
        shares: Shares,
    ) -> None:
        """One fault's segment on the leg's running cluster: its history written and checked."""
        number = len(self.rows) + 1
        history = self.out / "segments" / f"{number:03d}-{leg.protocol}-{nemesis}.jsonl.gz"
        base = self.checked
        settings.ops = shares.next(leg.kind, base)
        settings.duration = max(40.0, settings.ops / shares.rate(leg.kind))  # (runs at most twice that)
        settings.faults, settings.history_file = [nemesis], history

        def progress(recorded: int) -> None:
            bar.update(base + recorded - bar.n)

        settings.on_progress = progress
        bar.set_description(f"{leg.protocol} {leg.kind} {nemesis}")
        began = time.monotonic()
        data = checked_run(settings, topology, cluster, lambda line: None)
        row = SegmentRow.of(leg, nemesis, data, time.monotonic() - began, history)
        self.rows.append(row)
        shares.ran(leg.kind, row.operations + row.strong_operations, row.phases.get("sessions", 0.0))
        bar.update(self.checked - bar.n)
        if not row.clean or (leg.protocol != CONTROL and not passed(data)):
            tqdm.write(f"  segment {number}: {leg.protocol} {leg.kind} {nemesis}: {describe(row)}")

    def write(self) -> list[Path]:
        path = self.out / "soak.json"
        summary = {"ops": self.ops, "checked": self.checked, "interrupted": self.interrupted.is_set(),
                   "table": summed(self.rows), "overhead_s": self.overhead_s, "peak_mb": round(peak_mb()),
                   "segments": [asdict(r) for r in self.rows]}  # fmt: skip
        path.write_text(json.dumps(summary, indent=1))
        return [path]


def peak_mb() -> float:
    """This process's peak resident memory (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def describe(row: SegmentRow) -> str:
    parts = [f"{n} {p}" for p, n in row.anomalies.items() if n]
    parts += [f"{n} {what}" for what, n in (("fractured", row.fractured), ("lost", row.lost),
              ("doubled", row.doubled), ("not linearizable", row.not_linearizable),
              ("undecided", row.undecided), ("untyped errors", row.untyped_errors)) if n]  # fmt: skip
    if not row.converged:
        parts.append("replicas differ")
    return ", ".join(parts) or "clean"


COLUMNS = ("operations", *PATTERNS, "fractured", "lost", "doubled", "strong", "not linearizable", "undecided")


def time_spent(rows: list[SegmentRow], overhead_s: dict[str, float]) -> str:
    """Where the soak's time went: its clusters' starts and stops, and each phase of its
    segments summed (the sessions running is the part that checks operations)."""
    phases: dict[str, float] = dict(overhead_s)
    for row in rows:
        for phase, seconds in row.phases.items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    total = sum(phases.values()) or 1.0
    parts = ", ".join(f"{phase} {sec:,.0f} s ({sec / total:.0%})" for phase, sec in phases.items())
    return f"time spent: {parts}"


def summed(rows: list[SegmentRow]) -> list[dict]:
    """One row per (protocol, nemesis), summed over its segments."""
    cells: dict[tuple[str, str], dict] = {}
    for row in rows:
        cell = cells.setdefault((row.protocol, row.nemesis), dict.fromkeys(COLUMNS, 0))
        cell["operations"] += row.operations
        for pattern in PATTERNS:
            cell[pattern] += row.anomalies.get(pattern, 0)
        cell["fractured"] += row.fractured
        cell["lost"] += row.lost
        cell["doubled"] += row.doubled
        cell["strong"] += row.strong_operations
        cell["not linearizable"] += row.not_linearizable
        cell["undecided"] += row.undecided
    return [{"protocol": p, "nemesis": n, **cell} for (p, n), cell in cells.items()]


def table(rows: list[SegmentRow]) -> str:
    from loadtest.harness.report import render_table

    cells = summed(rows)
    lines = [[r["protocol"], r["nemesis"], *(f"{r[c]:,}" for c in COLUMNS)] for r in cells]
    total = [sum(r[c] for r in cells) for c in COLUMNS]
    lines.append(["all", "", *(f"{t:,}" for t in total)])
    headers = ["protocol", "nemesis", "ops", "thin air", "cyclic", "init read", "stale read", "fractured",
               "lost", "doubled", "strong", "not lin.", "undecided"]  # fmt: skip
    checked = total[0] + total[COLUMNS.index("strong")]
    return render_table(f"Soak: {checked:,} operations checked (causal and strong)", headers, lines)


def verdict(rows: list[SegmentRow], say: Callable[[str], None]) -> int:
    bad = [r for r in rows if not r.clean or (r.protocol != CONTROL and sum(r.anomalies.values()) > 0)]
    control = [r for r in rows if r.protocol == CONTROL]
    blind = bool(control) and not any(sum(r.anomalies.values()) for r in control)
    for row in bad:
        say(f"FAILED: {row.protocol} {row.kind} {row.nemesis}: {describe(row)} ({row.history})")
    if blind:
        say(f"FAILED: {CONTROL} showed no anomaly in {sum(r.operations for r in control):,} operations")
    if not bad and not blind:
        found = f", {CONTROL}'s anomalies found" if control else ""
        say(f"soak passed: every causal protocol clean{found}")
    return 1 if bad or blind else 0
