"""What a load-test run measured, per protocol, and the comparison of protocols run side by side:
Locust's figures (throughput, latency per operation, failures) plus what Locust cannot see, read
from the services' metrics: remote-update visibility per region pair and migration latency."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtest.harness.report import num, render_table
from loadtest.harness.results import VisibilityRow
from loadtest.workload.locust_run import RequestStats


@dataclass
class MigrationRow:
    """Migrations from ``origin`` to ``region``: as the client saw them (Locust, store target) and
    the attach's wait at the target (the services' metric, both targets)."""

    origin: str
    region: str
    count: int
    client_mean_ms: float | None = None
    client_p90_ms: float | None = None
    wait_mean_ms: float | None = None
    wait_p90_ms: float | None = None


LOAD_GENERATOR = "load generator"  # Locust's processes (master and workers)


@dataclass
class AttachRow:
    """Attaches at ``region`` that presented an update label made at ``origin`` (a causal past
    from elsewhere, not a migration): they wait for every region's clock to pass the label
    (paper Alg. 1), which is what migration labels avoid."""

    origin: str
    region: str
    count: int
    wait_mean_ms: float | None
    wait_p90_ms: float | None


@dataclass
class ProtocolSummary:
    protocol: str
    target: str
    clients: int
    duration: float
    requests: list[RequestStats]
    visibility: list[VisibilityRow]
    migrations: list[MigrationRow]
    failures: list[str] = field(default_factory=list)
    seed_seconds: float = 0.0
    update_attaches: list[AttachRow] = field(default_factory=list)
    cpu_s: dict[str, float] = field(default_factory=dict)  # CPU seconds by role during the run

    def cpu_us_per_op(self) -> dict[str, float]:
        return {role: 1e6 * s / self.total for role, s in self.cpu_s.items()} if self.total else {}

    @property
    def kind(self) -> str:
        return "store" if self.target == "store" else "http"

    def operations(self) -> list[RequestStats]:
        return [r for r in self.requests if r.kind == self.kind]

    @property
    def ops_per_s(self) -> float:
        return sum(r.per_s for r in self.operations())

    @property
    def total(self) -> int:
        return sum(r.requests for r in self.operations())

    @property
    def failed(self) -> int:
        return sum(r.failures for r in self.requests)

    def visibility_mean_ms(self) -> float | None:
        """Mean over all remote updates (weighted by pair)."""
        weighted = [(r.mean_ms, r.updates) for r in self.visibility if r.updates and r.mean_ms is not None]
        total = sum(updates for _, updates in weighted)
        return sum(ms * updates for ms, updates in weighted) / total if total else None

    def to_json(self) -> dict:
        data = asdict(self)
        data |= {
            "ops_per_s": self.ops_per_s, "total": self.total, "failed": self.failed,
            "cpu_us_per_op": self.cpu_us_per_op(),
        }  # fmt: skip
        return data


def operations_table(run: ProtocolSummary) -> str:
    rows = [
        [r.name, num(r.requests, 0), num(r.failures, 0), num(r.per_s, 1), num(r.p50_ms, 0), num(r.p90_ms, 0),
         num(r.p99_ms, 0), num(r.mean_ms, 1)]
        for r in sorted(run.requests, key=lambda r: (r.kind != run.kind, -r.requests))
        if r.kind in (run.kind, "setup")
    ]  # fmt: skip
    rows.append(
        ["all operations", num(run.total, 0), num(run.failed, 0), num(run.ops_per_s, 1), "", "", "", ""]
    )
    return render_table(
        f"[{run.protocol}] {run.target} target: {run.clients} users, {run.duration:g} s",
        ["operation", "requests", "failed", "per s", "p50 ms", "p90 ms", "p99 ms", "mean ms"],
        rows,
    )


def migrations_table(run: ProtocolSummary) -> str:
    rows = [
        [f"{m.origin} -> {m.region}", num(m.count, 0), num(m.client_mean_ms), num(m.client_p90_ms),
         num(m.wait_mean_ms), num(m.wait_p90_ms)]
        for m in run.migrations
    ]  # fmt: skip
    return render_table(
        f"[{run.protocol}] migrations (client: whole migration; wait: the attach at the target)",
        ["from -> to", "count", "client mean", "client p90", "wait mean", "wait p90"],
        rows,
    )


def update_attaches_table(run: ProtocolSummary) -> str:
    rows = [
        [f"{a.origin} -> {a.region}", num(a.count, 0), num(a.wait_mean_ms), num(a.wait_p90_ms)]
        for a in run.update_attaches
    ]
    title = f"[{run.protocol}] attaches with another region's update label (stabilization waits)"
    return render_table(title, ["label from -> at", "count", "wait mean", "wait p90"], rows)


def cpu_table(runs: Sequence[ProtocolSummary]) -> str | None:
    """µs of CPU per operation by role, protocols side by side: steadier than throughput on a
    shared machine, and it says where a protocol's price is paid."""
    measured = [run for run in runs if run.cpu_s]
    if not measured:
        return None
    per_op = [run.cpu_us_per_op() for run in measured]
    roles = [*sorted({role for cpu in per_op for role in cpu} - {LOAD_GENERATOR}), LOAD_GENERATOR]
    rows = [[role, *(num(cpu.get(role), 0) for cpu in per_op)] for role in roles]
    services = [sum(v for r, v in cpu.items() if r != LOAD_GENERATOR) for cpu in per_op]
    rows.append(["services in all", *(num(v, 0) for v in services)])
    if len(measured) > 1 and services[0]:
        ratio = num(services[-1] / services[0], 3)
        label = f"services, {measured[-1].protocol} / {measured[0].protocol}"
        rows.append([label, *[""] * (len(measured) - 1), ratio])
    return render_table(
        "CPU per operation by role (µs; every region's processes; Locust's own on the last line)",
        ["role", *(run.protocol for run in measured)],
        rows,
    )


def visibility_table(runs: Sequence[ProtocolSummary]) -> str:
    """Per pair, each protocol's mean and p90 side by side, and the extra over the first (eventual)."""
    base = runs[0]
    pairs = [(r.origin, r.region) for r in base.visibility]
    by = [{(r.origin, r.region): r for r in run.visibility} for run in runs]
    headers = ["origin -> region", "link ms"]
    for run in runs:
        headers += [f"{run.protocol} n", "mean", "p90"]
    if len(runs) > 1:
        headers += [f"extra mean ({runs[-1].protocol})", "extra p90"]
    rows = []
    for pair in pairs:
        row = [f"{pair[0]} -> {pair[1]}", num(by[0][pair].configured_ms)]
        for table in by:
            cell = table.get(pair)
            row += [num(cell.updates, 0), num(cell.mean_ms), num(cell.p90_ms)] if cell else ["-", "-", "-"]
        if len(runs) > 1:
            first, last = by[0].get(pair), by[-1].get(pair)
            row += [_diff(last.mean_ms if last else None, first.mean_ms if first else None),
                    _diff(last.p90_ms if last else None, first.p90_ms if first else None)]  # fmt: skip
        rows.append(row)
    return render_table(
        "Remote-update visibility per region pair (ms, from the regions' metrics)", headers, rows
    )


def _diff(a: float | None, b: float | None) -> str:
    return num(a - b, 1, sign=True) if a is not None and b is not None else "-"


def comparison(runs: Sequence[ProtocolSummary]) -> str:
    base = runs[0]
    lines = []
    for run in runs[1:]:
        ratio = run.ops_per_s / base.ops_per_s if base.ops_per_s else math.nan
        extra = _diff(run.visibility_mean_ms(), base.visibility_mean_ms())
        lines.append(
            f"{run.protocol} vs {base.protocol}: throughput {num(run.ops_per_s)} vs {num(base.ops_per_s)} "
            f"ops/s (ratio {num(ratio, 3)}); visibility {extra} ms on average over all remote updates"
        )
    return "\n".join(lines)


def report(runs: Sequence[ProtocolSummary]) -> str:
    parts = []
    for run in runs:
        parts += [operations_table(run), migrations_table(run), update_attaches_table(run)]
        if run.failures:
            parts.append("first failures:\n  " + "\n  ".join(run.failures))
    parts.append(visibility_table(runs))
    cpu = cpu_table(runs)
    if cpu:
        parts.append(cpu)
    if len(runs) > 1:
        parts.append(comparison(runs))
    return "\n\n".join(parts)


def write_summary(out_dir: Path, settings: dict, runs: Sequence[ProtocolSummary]) -> list[Path]:
    """summary.json, summary.txt and summary.png in ``out_dir``."""
    from loadtest.workload.summary_plot import plot_summary

    data = {"settings": settings, "runs": [r.to_json() for r in runs]}
    if len(runs) > 1 and runs[0].ops_per_s:
        data["ratios"] = {r.protocol: r.ops_per_s / runs[0].ops_per_s for r in runs[1:]}
    json_path = out_dir / "summary.json"
    json_path.write_text(json.dumps(_clean(data), indent=2))
    text_path = out_dir / "summary.txt"
    text_path.write_text(report(runs) + "\n")
    return [json_path, text_path, plot_summary(data, out_dir / "summary.png")]


def _clean(value: object) -> object:
    """NaN (a percentile of nothing) as null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
