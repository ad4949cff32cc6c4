"""What every experiment prints and writes: progress lines, aligned tables, numbers as tables
show them, and the rows as JSON (with the figure and the table beside them: ``publish``)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from loadtest.harness.cpu import CLIENT_ROLE, by_role, of_region
from loadtest.harness.results import OP_TITLES, OPS, ProtocolRun, VisibilityRow


# One colour per protocol in every figure that compares them.
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


def cpu_role_table(title: str, rows: Sequence[tuple[str, Mapping[str, float]]]) -> str:
    """CPU µs per operation by role, one row per (name, µs by role): on shared cores a
    protocol's throughput is the inverse of what its whole path costs, and the roles say where.
    The cluster's total leaves the benchmark's clients out; they have a column of their own
    where they were measured."""
    roles = sorted({r for _, cpu in rows for r in cpu if r != CLIENT_ROLE})
    clients = [CLIENT_ROLE] if any(CLIENT_ROLE in cpu for _, cpu in rows) else []
    return render_table(
        f"{title} ({os.cpu_count()} cores)",
        ["protocol", "cluster", *roles, *clients],
        [
            [
                name,
                num(sum(v for r, v in cpu.items() if r != CLIENT_ROLE), 0),
                *(num(cpu.get(r), 0) for r in [*roles, *clients]),
            ]
            for name, cpu in rows
        ],
    )


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
