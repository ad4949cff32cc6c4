"""The benchmark's figures. Per run: one row per protocol, throughput (causal vs raw Redis) on the
left and remote-update visibility (measured vs configured one-way latency) per region pair on the
right. With protocols compared: each one's throughput relative to the baseline (every round a
dot, the median a bar) and its CPU per operation stacked by role (medians over the rounds).

Drawn from the results JSON only, so a figure can be redrawn from a saved run:

    python -m loadtest plot bench-results/demo-3region.json
"""

from __future__ import annotations

from pathlib import Path
from statistics import median

from matplotlib.axes import Axes

from loadtest.harness.plots import plt
from loadtest.harness.results import OP_TITLES

CAUSAL, RAW, CONFIGURED, P99 = "#1f77b4", "#bbbbbb", "#555555", "#ff7f0e"


def _legend_below(ax: Axes) -> None:
    """Under the axes, so that it never hides a bar."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8, frameon=False)


def _throughput(ax: Axes, run: dict) -> None:
    """Linear scale, so that bar heights compare honestly; the ratio is written on each pair."""
    by_key = {(p["system"], p["op"]): p for p in run["throughput"]}
    ops = [op for op in OP_TITLES if ("causal", op) in by_key and ("raw", op) in by_key]
    xs = range(len(ops))
    width = 0.38
    causal = [by_key["causal", op]["ops_per_s"] for op in ops]
    raw = [by_key["raw", op]["ops_per_s"] for op in ops]
    ax.bar([x - width / 2 for x in xs], causal, width, label="causal (client library)", color=CAUSAL)
    ax.bar([x + width / 2 for x in xs], raw, width, label="raw redis-py", color=RAW)
    for x, c, r in zip(xs, causal, raw, strict=True):
        if r > 0:
            ax.annotate(f"{c / r:.2f}", (x - width / 2, c), ha="center", va="bottom", fontsize=9)
    ax.set_ylim(0, 1.1 * max([*causal, *raw, 1]))
    ax.set_xticks(list(xs), [OP_TITLES[op] for op in ops])
    ax.set_ylabel("ops/s")
    ax.set_title(f"{run['protocol']}: throughput at {run['region']} (number: causal/raw)")
    _legend_below(ax)


def _visibility(ax: Axes, run: dict) -> None:
    rows = run["visibility"]
    names = [f"{r['origin']}\n→ {r['region']}" for r in rows]  # two lines: long names never collide
    xs = range(len(rows))
    width = 0.27

    def values(key: str) -> list[float]:
        return [r[key] if r[key] is not None else 0.0 for r in rows]

    ax.bar(
        [x - width for x in xs], values("configured_ms"), width, label="configured one-way", color=CONFIGURED
    )
    ax.bar(list(xs), values("mean_ms"), width, label="measured mean", color=CAUSAL)
    ax.bar([x + width for x in xs], values("p99_ms"), width, label="measured p99", color=P99)
    ax.set_xticks(list(xs), names, fontsize=8 if len(rows) > 4 else 10)
    ax.set_ylabel("ms")
    ax.set_title(f"{run['protocol']}: remote-update visibility per pair")
    _legend_below(ax)


ROLE_COLOURS = {
    "bench client": "#bbbbbb", "frontend": "#1f77b4", "redis": "#d62728", "bulk-sender": "#2ca02c",
    "bulk-receiver": "#98df8a", "label-sink": "#ff7f0e", "serializer": "#9467bd",
}  # fmt: skip


def _ratios(ax: Axes, results: dict) -> None:
    comparison = results["comparison"]
    protocols = list(comparison["protocols"])
    width = 0.8 / len(protocols)
    for i, protocol in enumerate(protocols):
        throughput = comparison["protocols"][protocol]["throughput"]
        ops = [op for op in OP_TITLES if op in throughput and throughput[op]["ratio"] is not None]
        xs = [k + (i - (len(protocols) - 1) / 2) * width for k in range(len(ops))]
        ratios = [throughput[op]["ratio"] for op in ops]
        ax.bar(xs, ratios, width * 0.9, label=f"{protocol} (median)", alpha=0.8)
        for x, op, ratio in zip(xs, ops, ratios, strict=True):
            base = throughput[op]["baseline_ops_s"]
            dots = [r / base for r in throughput[op]["rounds"]] if base else []
            ax.plot([x] * len(dots), dots, "k.", markersize=4)
            ax.annotate(f"{ratio:.3f}", (x, ratio / 2), ha="center", va="center", fontsize=10, color="white")
    ax.axhline(1.0, color=CONFIGURED, linewidth=1)
    ax.set_xticks(range(len(OP_TITLES)), list(OP_TITLES.values()))
    ax.set_ylim(0, 1.25)
    ax.set_ylabel(f"throughput / {comparison['baseline']}")
    ax.set_title(f"throughput relative to {comparison['baseline']} (dots: rounds)")
    _legend_below(ax)


def _cpu_by_role(ax: Axes, results: dict) -> None:
    """Per operation, one stacked bar per protocol: µs of CPU per operation by role."""
    protocols = sorted({run["protocol"] for run in results["runs"]}, key=lambda p: (p != "eventual", p))
    per: dict[tuple[str, str], dict[str, float]] = {}
    for protocol in protocols:
        for op in OP_TITLES:
            phases = [
                p for run in results["runs"] if run["protocol"] == protocol
                for p in run["throughput"]
                if p["system"] == "causal" and p["op"] == op and p.get("cpu_us_per_op")
            ]  # fmt: skip
            seen = {role for p in phases for role in p["cpu_us_per_op"]}
            per[protocol, op] = {r: median(p["cpu_us_per_op"].get(r, 0.0) for p in phases) for r in seen}
    if not any(per.values()):
        ax.set_visible(False)
        return
    roles = [r for r in ROLE_COLOURS if any(r in v for v in per.values())]
    roles += sorted({r for v in per.values() for r in v} - set(roles))
    width = 0.8 / len(protocols)
    labelled: set[str] = set()
    for i, protocol in enumerate(protocols):
        for k, op in enumerate(OP_TITLES):
            x, bottom = k + (i - (len(protocols) - 1) / 2) * width, 0.0
            for role in roles:
                value = per[protocol, op].get(role, 0.0)
                label = role if role not in labelled else None
                labelled.add(role)
                ax.bar(x, value, width * 0.9, bottom=bottom, color=ROLE_COLOURS.get(role), label=label)
                bottom += value
            ax.annotate(protocol, (x, bottom), ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(range(len(OP_TITLES)), list(OP_TITLES.values()))
    ax.set_ylabel("µs of CPU per operation (all processes)")
    ax.set_title("where the CPU goes, by role (medians over the rounds)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4, fontsize=8, frameon=False)


def plot_comparison(results: dict, path: Path) -> Path:
    """Writes the comparison PNG (the results must have a "comparison") and returns its path."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.6))
    _ratios(left, results)
    _cpu_by_role(right, results)
    rounds = results["comparison"].get("rounds", 1)
    fig.suptitle(f"{results['topology']}: protocols side by side ({rounds} alternating round(s))")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_results(results: dict, path: Path) -> Path:
    """Writes the PNG and returns its path (with --repeat, the first round of each protocol; the
    printed comparison has the medians)."""
    runs = [run for run in results["runs"] if run.get("round", 0) == 0]
    fig, axes = plt.subplots(len(runs), 2, figsize=(13, 5.2 * len(runs)), squeeze=False)
    for (left, right), run in zip(axes, runs, strict=True):
        _throughput(left, run)
        _visibility(right, run)
    settings = results["settings"]
    fig.suptitle(
        f"{results['topology']}: {settings['clients']} clients, {settings['duration']:g} s per phase, "
        f"{settings['value_size']}-byte values, {results['host']['cpus']} CPUs"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
