"""What the throughput bench prints and writes: its tables per protocol, the results JSON and the
figure (drawn by throughput_plots.py from that JSON, so ``python -m loadtest plot`` redraws it)."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from loadtest.harness.report import cpu_table, num, render_table, say, visibility_table
from loadtest.harness.results import OP_TITLES, OPS, ProtocolRun, Settings
from services.topology import Topology


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
            num(causal.ops_per_s, 0), num(causal.p50_ms, 2), num(causal.p99_ms, 2),
            num(raw.ops_per_s, 0), num(raw.p50_ms, 2), num(raw.p99_ms, 2),
            num(run.ratio(op), 3),
        ])  # fmt: skip
    table = render_table(title, headers, rows)
    errors = [f"{p.system} {OP_TITLES[p.op]}: {p.errors} ({p.first_error})" for p in run.phases if p.errors]
    return table + ("\nerrors: " + "; ".join(errors) if errors else "")


def report(run: ProtocolRun, settings: Settings) -> str:
    """The tables of one protocol, as printed (and as they go into the README)."""
    probe = visibility_table(
        f"Remote-update visibility, protocol {run.protocol}: {settings.probe_writes} writes paced at "
        f"{settings.probe_rate:g}/s from each region {'at once' if settings.probe_together else 'in turn'} "
        f"(extra = mean - configured one-way latency; "
        f"percentiles interpolated in histogram buckets)",
        run.visibility_probe,
    )
    load = visibility_table(
        f"Remote-update visibility during the load phases, protocol {run.protocol}: "
        f"{run.load_writes:,} closed-loop writes from {run.region}",
        run.visibility_load,
    )
    cpu = cpu_table(run)
    return "\n\n".join([throughput_table(run, settings), *([cpu] if cpu else []), probe, load])


def results_json(
    topology: Topology, settings: Settings, runs: Sequence[ProtocolRun], errors: dict[str, str]
) -> dict:
    """Everything measured, with what it was measured on: the figure is redrawn from this alone."""
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
            from loadtest.harness.throughput_plots import plot_comparison, plot_results
        except ImportError as exc:
            say(f"no plot: {exc} (pip install -e '.[bench]')")
        else:
            paths.append(plot_results(results, out / f"{results['topology']}.png"))
            if results.get("comparison"):
                paths.append(plot_comparison(results, out / f"{results['topology']}-compare.png"))
    return paths
