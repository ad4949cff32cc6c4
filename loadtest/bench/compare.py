"""Protocols side by side: each protocol's throughput relative to the baseline (``eventual``) and
its extra remote-update visibility latency per region pair, as the paper's §7.3 reports them.

With several rounds (``--repeat``) each figure is the median over the rounds: on a shared 2-core
machine two identical runs can differ by a third, and the median of alternating runs is what
survives that."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean, median

from loadtest.bench.report import num, render_table
from loadtest.bench.results import OP_TITLES, OPS, ProtocolRun, VisibilityRow
from services.topology import Topology

BASELINE = "eventual"


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _throughput(runs: Sequence[ProtocolRun], op: str) -> list[float]:
    return [p.ops_per_s for r in runs if (p := r.phase("causal", op))]


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
            ratio = o_med / b_med if b_med and o_med is not None else None
            throughput[op] = {
                "baseline_ops_s": b_med, "ops_s": o_med, "ratio": ratio,
                "baseline_rounds": b, "rounds": o,
            }  # fmt: skip
        pairs = []
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
             _spread(t["baseline_rounds"]), _spread(t["rounds"])]
            for op, t in entry["throughput"].items()
        ]  # fmt: skip
        rounds = data.get("rounds", 1)
        what = f"median of {rounds} alternating rounds" if rounds > 1 else "one round"
        parts.append(render_table(
            f"Throughput, {protocol} vs {data['baseline']} (causal client, same settings; {what})",
            ["op", f"{data['baseline']} ops/s", f"{protocol} ops/s", "ratio",
             f"{data['baseline']} range", f"{protocol} range"], rows,
        ))  # fmt: skip
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
