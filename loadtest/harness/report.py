"""What the benchmark prints and writes: progress lines, aligned tables, the results JSON and
the figure (drawn by ``loadtest.plots`` from that JSON)."""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from loadtest.bench.cpu import by_role, of_region
from loadtest.bench.results import OP_TITLES, OPS, ProtocolRun, Settings, VisibilityRow
from services.topology import Topology

# One colour per protocol in every figure that compares them.
PROTOCOL_COLOURS = {"eventual": "#555555", "saturn": "#1f77b4", "gentlerain": "#d62728", "cure": "#ff7f0e"}


def say(message: str) -> None:
    """A progress line, flushed at once: runs are long and their output is often piped."""
    print(message, flush=True)


def write_rows(out_dir: str | None, name: str, rows: Sequence) -> None:
    """A micro-benchmark's rows (dataclasses) as ``out_dir/name.json``, when asked for."""
    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
        say(f"wrote {out / f'{name}.json'}")


def publish(out: Path, name: str, rows: Sequence, text: str, plot: Callable[[Path], None]) -> None:
    """A figure's end: its table printed, its rows as ``out/name.json``, its plot as ``out/name.png``."""
    print(text)
    write_rows(str(out), name, rows)
    plot(out / f"{name}.png")
    say(f"wrote {out / f'{name}.png'}")


def num(value: float | None, digits: int = 1, sign: bool = False) -> str:
    """A number as shown: thousands separated, "-" where there is no value."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def render_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain text, first column left-aligned, the others right-aligned (numbers line up)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([title, line(headers), rule, *(line(r) for r in rows)])


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


def visibility_table(title: str, rows: Sequence[VisibilityRow]) -> str:
    headers = [
        "origin -> region",
        "updates",
        "configured ms",
        "mean ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "extra ms",
    ]
    cells = [
        [
            f"{r.origin} -> {r.region}", f"{r.updates:,}", num(r.configured_ms), num(r.mean_ms),
            num(r.p50_ms), num(r.p90_ms), num(r.p99_ms), num(r.extra_ms, sign=True),
        ]
        for r in rows
    ]  # fmt: skip
    return render_table(title, headers, cells)


def cpu_table(run: ProtocolRun) -> str | None:
    """CPU microseconds per causal operation by role, and the idle cluster's CPU by role."""
    phases = [p for op in OPS if (p := run.phase("causal", op)) and p.cpu_s]
    if not phases:
        return None
    per_op = {p.op: p.cpu_us_per_op for p in phases}
    idle = by_role(run.idle_cpu)
    roles = sorted({role for p in phases for role in per_op[p.op]} | set(idle))
    rows = [
        [role, *(num(per_op[p.op].get(role), 0) for p in phases), num(100 * idle.get(role, 0.0), 1)]
        for role in roles
    ]
    rows.append(["total", *(num(p.total_cpu_us_per_op, 0) for p in phases), num(100 * sum(idle.values()), 1)])
    rows.append(
        [f"{run.region}'s own", *(num(p.region_cpu_us_per_op(run.region), 0) for p in phases),
         num(100 * of_region(run.idle_cpu, run.region), 1)]
    )  # fmt: skip
    return render_table(
        f"CPU by role, protocol {run.protocol}: µs of CPU per causal operation (all regions' "
        f"processes; last line: the load region's own), and % of one core when idle",
        ["role", *(f"{OP_TITLES[p.op]} µs/op" for p in phases), "idle %"],
        rows,
    )


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
            from loadtest.plots import plot_comparison, plot_results
        except ImportError as exc:
            say(f"no plot: {exc} (pip install -e '.[bench]')")
        else:
            paths.append(plot_results(results, out / f"{results['topology']}.png"))
            if results.get("comparison"):
                paths.append(plot_comparison(results, out / f"{results['topology']}-compare.png"))
    return paths
