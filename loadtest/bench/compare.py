"""Protocols side by side: each protocol's throughput relative to the baseline (``eventual``) and
its extra remote-update visibility latency per region pair, as the paper's §7.3 reports them."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean

from loadtest.bench.report import num, render_table
from loadtest.bench.results import OP_TITLES, OPS, ProtocolRun, VisibilityRow
from services.topology import Topology

BASELINE = "eventual"


def _by_pair(rows: Sequence[VisibilityRow]) -> dict[tuple[str, str], VisibilityRow]:
    return {(r.origin, r.region): r for r in rows}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def comparison(topology: Topology, runs: Sequence[ProtocolRun]) -> dict | None:
    """Per protocol other than the baseline: throughput ratios and extra visibility per pair."""
    base = next((r for r in runs if r.protocol == BASELINE), None)
    others = [r for r in runs if r.protocol != BASELINE]
    if base is None or not others:
        return None
    result: dict = {"baseline": BASELINE, "protocols": {}}
    base_pairs = _by_pair(base.visibility_probe)
    for run in others:
        throughput = {}
        for op in OPS:
            b, o = base.phase("causal", op), run.phase("causal", op)
            ratio = o.ops_per_s / b.ops_per_s if b and o and b.ops_per_s > 0 else None
            throughput[op] = {"baseline_ops_s": b and b.ops_per_s, "ops_s": o and o.ops_per_s, "ratio": ratio}
        pairs = []
        for key, row in _by_pair(run.visibility_probe).items():
            ref = base_pairs.get(key)
            direct = topology.region_latency_ms(*key)
            tree = topology.tree_path_ms(*key) if topology.tree else None
            pairs.append({
                "origin": key[0], "region": key[1], "configured_ms": direct, "tree_path_ms": tree,
                "baseline_mean_ms": ref and ref.mean_ms, "mean_ms": row.mean_ms,
                "extra_mean_ms": _diff(row.mean_ms, ref and ref.mean_ms),
                "baseline_p90_ms": ref and ref.p90_ms, "p90_ms": row.p90_ms,
                "extra_p90_ms": _diff(row.p90_ms, ref and ref.p90_ms),
            })  # fmt: skip
        extras = [p["extra_mean_ms"] for p in pairs if p["extra_mean_ms"] is not None]
        short = [
            p["extra_mean_ms"]
            for p in pairs
            if p["extra_mean_ms"] is not None and p["tree_path_ms"] is not None
            and p["tree_path_ms"] <= p["configured_ms"]
        ]  # fmt: skip
        result["protocols"][run.protocol] = {
            "throughput": throughput,
            "visibility": pairs,
            "extra_mean_ms_all_pairs": mean(extras) if extras else None,
            "extra_mean_ms_short_tree_pairs": mean(short) if short else None,
        }
    return result


def comparison_tables(data: dict) -> str:
    parts = []
    for protocol, entry in data["protocols"].items():
        rows = [
            [OP_TITLES[op], num(t["baseline_ops_s"], 0), num(t["ops_s"], 0), num(t["ratio"], 3)]
            for op, t in entry["throughput"].items()
        ]
        parts.append(render_table(
            f"Throughput, {protocol} vs {data['baseline']} (causal client, same settings)",
            ["op", f"{data['baseline']} ops/s", f"{protocol} ops/s", "ratio"], rows,
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
