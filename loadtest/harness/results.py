"""What one run is asked to do and what it measured, in the shape the tables and the JSON take."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from loadtest.harness.cpu import by_role, of_region, per_operation_us
from loadtest.harness.metrics import Pair

OPS = ("read", "write", "mix")
OP_TITLES = {"read": "read", "write": "write", "mix": "mix 9:1"}


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
    probe_together: bool = False
    idle: float = 5.0  # seconds the idle cluster's CPU is measured (0: not measured)


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
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds by process in the window

    @property
    def cpu_us_per_op(self) -> dict[str, float]:
        """By role (all regions' processes of a role together)."""
        return per_operation_us(by_role(self.cpu_s), self.ops)

    def region_cpu_us_per_op(self, region: str) -> float | None:
        """The CPU of one region's own processes per operation."""
        return 1e6 * of_region(self.cpu_s, region) / self.ops if self.cpu_s and self.ops else None

    @property
    def total_cpu_us_per_op(self) -> float | None:
        per_op = self.cpu_us_per_op
        return sum(per_op.values()) if per_op else None


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
    cumulative: list[tuple[float, float]] = field(default_factory=list)  # Histogram.cumulative_ms()

    @property
    def extra_ms(self) -> float | None:
        return None if self.mean_ms is None else self.mean_ms - self.configured_ms


@dataclass
class ProtocolRun:
    protocol: str
    region: str
    round: int = 0  # with --repeat: which round (protocols alternate their order round by round)
    phases: list[PhaseResult] = field(default_factory=list)
    visibility_probe: list[VisibilityRow] = field(default_factory=list)
    visibility_load: list[VisibilityRow] = field(default_factory=list)
    load_writes: int = 0
    missing_updates: dict[str, int] = field(default_factory=dict)
    idle_cpu: dict[str, float] = field(default_factory=dict)  # fraction of a core by process, idle

    def note_missing(self, short: dict[Pair, int]) -> None:
        """Records updates not visible in time (lost or very late): reported, not hidden."""
        for (origin, region), missing in short.items():
            key = f"{origin}->{region}"
            self.missing_updates[key] = self.missing_updates.get(key, 0) + missing

    def phase(self, system: str, op: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.system == system and p.op == op), None)

    def ratio(self, op: str) -> float | None:
        causal, raw = self.phase("causal", op), self.phase("raw", op)
        if not causal or not raw or raw.ops_per_s <= 0:
            return None
        return causal.ops_per_s / raw.ops_per_s

    def phase_json(self, p: PhaseResult) -> dict:
        return {
            **asdict(p),
            "cpu_us_per_op": p.cpu_us_per_op,
            "total_cpu_us_per_op": p.total_cpu_us_per_op,
            "region_cpu_us_per_op": p.region_cpu_us_per_op(self.region),
        }

    def to_json(self) -> dict:
        def rows(items: list[VisibilityRow]) -> list[dict]:
            return [{**asdict(r), "extra_ms": r.extra_ms} for r in items]

        return {
            "protocol": self.protocol,
            "region": self.region,
            "round": self.round,
            "throughput": [self.phase_json(p) for p in self.phases],
            "idle_cpu_cores": self.idle_cpu,
            "ratios": {op: self.ratio(op) for op in OPS},
            "visibility": rows(self.visibility_probe),
            "visibility_under_load": rows(self.visibility_load),
            "load_writes": self.load_writes,
            "missing_updates": self.missing_updates,
        }
