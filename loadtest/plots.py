"""The benchmark's figure: one row per protocol, throughput (causal vs raw Redis) on the left and
remote-update visibility (measured vs configured one-way latency) per region pair on the right.

Drawn from the results JSON only, so a figure can be redrawn from a saved run:

    python -m loadtest.plots bench-results/demo-3region.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed (servers, CI)

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from loadtest.bench.results import OP_TITLES

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


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m loadtest.plots RESULTS.json", file=sys.stderr)
        return 2
    source = Path(argv[0])
    print(plot_results(json.loads(source.read_text()), source.with_suffix(".png")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
