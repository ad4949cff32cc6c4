"""Protocols side by side: each protocol's throughput relative to the baseline (``eventual``) and
its extra remote-update visibility latency per region pair, as the paper's §7.3 reports them.

With several rounds (``--repeat``) each figure is the median over the rounds: on a shared 2-core
machine two identical runs can differ by a third, and the median of alternating runs is what
survives that."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from loadtest.harness.report import num, render_table
from loadtest.harness.results import OP_TITLES, OPS, ProtocolRun, VisibilityRow
from loadtest.harness.stats import median_present as _median
from services.topology import Topology

BASELINE = "eventual"


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _throughput(runs: Sequence[ProtocolRun], op: str) -> list[float]:
    return [p.ops_per_s for r in runs if (p := r.phase("causal", op))]


def _cpu_per_op(runs: Sequence[ProtocolRun], op: str) -> list[float]:
    return [us for r in runs if (p := r.phase("causal", op)) and (us := p.total_cpu_us_per_op) is not None]


def _region_cpu_per_op(runs: Sequence[ProtocolRun], op: str) -> list[float]:
    """The load region's own processes only (where the paper measures: clients, serializers and
    the other datacenters run on machines of their own there)."""
    found = [(r, r.phase("causal", op)) for r in runs]
    return [us for r, p in found if p and (us := p.region_cpu_us_per_op(r.region)) is not None]


def _idle(runs: Sequence[ProtocolRun]) -> list[float]:
    return [sum(r.idle_cpu.values()) for r in runs if r.idle_cpu]


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if base and value is not None else None


def _visibility(runs: Sequence[ProtocolRun]) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    """Per pair, the median over the rounds of the probe's mean and 90th percentile."""
    pairs: dict[tuple[str, str], list[VisibilityRow]] = {}
    for run in runs:
        for row in run.visibility_probe:
            pairs.setdefault((row.origin, row.region), []).append(row)
    return {
        key: (_median([r.mean_ms for r in rows]), _median([r.p90_ms for r in rows]))
        for key, rows in pairs.items()
    }


def comparison(topology: Topology, runs: Sequence[ProtocolRun]) -> dict | None:
    """Per protocol other than the baseline: throughput ratios and extra visibility per pair."""
    by_protocol: dict[str, list[ProtocolRun]] = {}
    for run in runs:
        by_protocol.setdefault(run.protocol, []).append(run)
    base = by_protocol.get(BASELINE)
    others = {p: r for p, r in by_protocol.items() if p != BASELINE}
    if not base or not others:
        return None
    rounds = max(len(r) for r in by_protocol.values())
    result: dict = {"baseline": BASELINE, "rounds": rounds, "protocols": {}}
    base_pairs = _visibility(base)
    for protocol, protocol_runs in others.items():
        throughput = {}
        for op in OPS:
            b, o = _throughput(base, op), _throughput(protocol_runs, op)
            b_med, o_med = _median(b), _median(o)
            b_cpu, o_cpu = _median(_cpu_per_op(base, op)), _median(_cpu_per_op(protocol_runs, op))
            b_dc, o_dc = _median(_region_cpu_per_op(base, op)), _median(_region_cpu_per_op(protocol_runs, op))
            throughput[op] = {
                "baseline_ops_s": b_med, "ops_s": o_med, "ratio": _ratio(o_med, b_med),
                "baseline_rounds": b, "rounds": o,
                "baseline_cpu_us_per_op": b_cpu, "cpu_us_per_op": o_cpu, "cpu_ratio": _ratio(o_cpu, b_cpu),
                "baseline_region_cpu_us_per_op": b_dc, "region_cpu_us_per_op": o_dc,
                "region_cpu_ratio": _ratio(o_dc, b_dc),
            }  # fmt: skip
        pairs: list[dict[str, Any]] = []
        for key, (mean_ms, p90_ms) in _visibility(protocol_runs).items():
            ref_mean, ref_p90 = base_pairs.get(key, (None, None))
            direct = topology.region_latency_ms(*key)
            tree = topology.tree_path_ms(*key) if topology.tree else None
            pairs.append({
                "origin": key[0], "region": key[1], "configured_ms": direct, "tree_path_ms": tree,
                "baseline_mean_ms": ref_mean, "mean_ms": mean_ms, "extra_mean_ms": _diff(mean_ms, ref_mean),
                "baseline_p90_ms": ref_p90, "p90_ms": p90_ms, "extra_p90_ms": _diff(p90_ms, ref_p90),
            })  # fmt: skip
        extras = [p["extra_mean_ms"] for p in pairs if p["extra_mean_ms"] is not None]
        short = [
            p["extra_mean_ms"]
            for p in pairs
            if p["extra_mean_ms"] is not None and p["tree_path_ms"] is not None
            and p["tree_path_ms"] <= p["configured_ms"]
        ]  # fmt: skip
        result["protocols"][protocol] = {
            "throughput": throughput,
            "baseline_idle_cores": _median(_idle(base)),
            "idle_cores": _median(_idle(protocol_runs)),
            "visibility": pairs,
            "extra_mean_ms_all_pairs": mean(extras) if extras else None,
            "extra_mean_ms_short_tree_pairs": mean(short) if short else None,
        }
    return result


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):,.0f}-{max(values):,.0f}" if len(values) > 1 else ""


def comparison_tables(data: dict) -> str:
    parts = []
    for protocol, entry in data["protocols"].items():
        rows = [
            [OP_TITLES[op], num(t["baseline_ops_s"], 0), num(t["ops_s"], 0), num(t["ratio"], 3),
             _spread(t["baseline_rounds"]), _spread(t["rounds"]),
             num(t.get("baseline_cpu_us_per_op"), 0), num(t.get("cpu_us_per_op"), 0),
             num(t.get("cpu_ratio"), 3), num(t.get("region_cpu_ratio"), 3)]
            for op, t in entry["throughput"].items()
        ]  # fmt: skip
        rounds = data.get("rounds", 1)
        what = f"median of {rounds} alternating rounds" if rounds > 1 else "one round"
        base = data["baseline"]
        parts.append(render_table(
            f"Throughput, {protocol} vs {base} (causal client, same settings; {what}); CPU = µs of CPU "
            f"per operation summed over every process; DC CPU ratio = the same over the load region's "
            f"own processes only",
            ["op", f"{base} ops/s", f"{protocol} ops/s", "ratio", f"{base} range", f"{protocol} range",
             f"{base} CPU", f"{protocol} CPU", "CPU ratio", "DC CPU ratio"], rows,
        ))  # fmt: skip
        if entry.get("idle_cores") is not None:
            base_idle = 100 * (entry.get("baseline_idle_cores") or 0)
            parts.append(
                f"idle cluster: {base} {num(base_idle, 1)} % of one core, "
                f"{protocol} {num(100 * entry['idle_cores'], 1)} %"
            )
        rows = [
            [f"{p['origin']} -> {p['region']}", num(p["configured_ms"]), num(p["tree_path_ms"]),
             num(p["baseline_mean_ms"]), num(p["mean_ms"]), num(p["extra_mean_ms"], sign=True),
             num(p["baseline_p90_ms"]), num(p["p90_ms"]), num(p["extra_p90_ms"], sign=True)]
            for p in entry["visibility"]
        ]  # fmt: skip
        parts.append(render_table(
            f"Visibility latency, {protocol} vs {data['baseline']} (probe writes; ms)",
            ["origin -> region", "bulk", "tree path", "base mean", "mean", "extra",
             "base p90", "p90", "extra p90"], rows,
        ))  # fmt: skip
        parts.append(
            f"{protocol}: extra visibility {num(entry['extra_mean_ms_all_pairs'], sign=True)} ms on average "
            f"over all pairs, {num(entry['extra_mean_ms_short_tree_pairs'], sign=True)} ms over pairs whose "
            f"tree path is not longer than their bulk link"
        )
    return "\n\n".join(parts)
