"""Reading a finished run beside a paper's figure: the experiment's JSON rows, means that stay
defined when a figure is missing, and the markdown ``python -m loadtest paper`` writes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def rows_of(path: Path) -> list[dict]:
    """The rows an experiment wrote (``write_rows``/``publish``)."""
    return json.loads(path.read_text())


def mean(values: list[float]) -> float:
    """The mean, NaN (shown as "-") where nothing was measured."""
    return statistics.fmean(values) if values else float("nan")


def extra_by_configuration(rows: list[dict]) -> dict[str, float]:
    """A visibility figure's mean extra visibility per configuration, over every pair."""
    by: dict[str, list[float]] = {}
    for row in rows:
        if row["extra_ms"] is not None:
            by.setdefault(row["configuration"], []).append(row["extra_ms"])
    return {name: mean(values) for name, values in by.items()}


def pair(rows: list[dict], configuration: str, origin: str, region: str) -> dict:
    """A visibility figure's row for one configuration and pair."""
    return next(
        r for r in rows if (r["configuration"], r["origin"], r["region"]) == (configuration, origin, region)
    )


def markdown(name: str, table: list[list[str]], verdict: str) -> str:
    lines = [f"# {name}: the paper and this run", "", "| what | paper | here |", "|---|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in table]
    return "\n".join([*lines, "", verdict, ""])
