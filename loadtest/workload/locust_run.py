"""Running Locust headless as child processes (one, or a master and N workers on this machine)
and reading what it wrote: the ``_stats.csv`` of every request name, and the JSON stats."""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


@dataclass(frozen=True)
class LocustOptions:
    user_class: str  # StoreUser or WebUser
    clients: int
    duration: float
    mix: str = "facebook"
    think_ms: float = 0.0
    seed: int = 1
    workers: int = 0  # 0: one process; N: a master and N workers


@dataclass(frozen=True)
class RequestStats:
    """One row of Locust's _stats.csv (times in ms)."""

    kind: str
    name: str
    requests: int
    failures: int
    per_s: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float = float("nan")


def read_stats(csv_prefix: Path) -> list[RequestStats]:
    """Every request name's row (the "Aggregated" row left out: totals are computed per kind)."""
    path = Path(f"{csv_prefix}_stats.csv")
    rows = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Name"] == "Aggregated":
                continue
            rows.append(
                RequestStats(
                    kind=row["Type"], name=row["Name"], requests=int(row["Request Count"]),
                    failures=int(row["Failure Count"]), per_s=float(row["Requests/s"]),
                    mean_ms=float(row["Average Response Time"]), p50_ms=_number(row["50%"]),
                    p90_ms=_number(row["90%"]), p99_ms=_number(row["99%"]),
                    max_ms=_number(row.get("Max Response Time", "nan")),
                )
            )  # fmt: skip
    return rows


def read_failures(csv_prefix: Path, limit: int = 5) -> list[str]:
    path = Path(f"{csv_prefix}_failures.csv")
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return [
            f"{r['Method']} {r['Name']}: {r['Error']} (x{r['Occurrences']})" for r in csv.DictReader(handle)
        ][:limit]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:  # "N/A" when nothing was recorded
        return float("nan")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def locust_command(options: LocustOptions, plan_dir: Path, topology: Path, csv_prefix: Path) -> list[str]:
    return [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        "-u", str(options.clients), "-r", str(options.clients), "-t", f"{options.duration:g}s",
        "--stop-timeout", "10", "--plan", str(plan_dir), "--topology", str(topology),
        "--mix", options.mix, "--think-ms", f"{options.think_ms:g}", "--seed", str(options.seed),
        "--worker-count", str(max(1, options.workers)), options.user_class,
    ]  # fmt: skip


def run_locust(
    options: LocustOptions,
    plan_dir: Path,
    topology: Path,
    csv_prefix: Path,
    progress: Callable[[str], None],
) -> list[RequestStats]:
    """Runs the test to the end, saying every few seconds how far it got; returns the stats.
    Locust's own output goes to ``<csv_prefix>.log``. Raises RuntimeError if Locust fails."""
    command = locust_command(options, plan_dir, topology, csv_prefix)
    outputs = ["--csv", str(csv_prefix), "--json-file", f"{csv_prefix}"]
    log_path = Path(f"{csv_prefix}.log")
    workers: list[subprocess.Popen] = []
    with log_path.open("w") as log:
        if options.workers:
            port = _free_port()
            master = [*command, "--master", "--master-bind-host", "127.0.0.1",  # its workers are here
                      "--master-bind-port", str(port), "--expect-workers", str(options.workers),
                      "--expect-workers-max-wait", "60", *outputs]  # fmt: skip
            main = subprocess.Popen(master, stdout=log, stderr=subprocess.STDOUT)
            for _ in range(options.workers):
                worker = [*command, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)]
                workers.append(subprocess.Popen(worker, stdout=log, stderr=subprocess.STDOUT))
        else:
            main = subprocess.Popen([*command, *outputs], stdout=log, stderr=subprocess.STDOUT)
        try:
            _follow(main, options.duration, progress)
        finally:
            for process in [main, *workers]:
                if process.poll() is None:
                    process.terminate()
            for process in [main, *workers]:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
    if main.returncode not in (0, 1):  # 1: the run had failed requests (reported, not fatal)
        raise RuntimeError(f"Locust exited with {main.returncode}; its log: {log_path}\n{_tail(log_path)}")
    if not Path(f"{csv_prefix}_stats.csv").exists():
        raise RuntimeError(f"Locust wrote no stats; its log: {log_path}\n{_tail(log_path)}")
    return read_stats(csv_prefix)


def _follow(process: subprocess.Popen, duration: float, progress: Callable[[str], None]) -> None:
    started = time.monotonic()
    deadline = started + duration + 120  # start-up, stop timeout and report on top of the run
    next_note = started + 10
    while process.poll() is None:
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(f"Locust did not finish within {duration + 120:.0f} s")
        if now >= next_note:
            progress(f"{min(now - started, duration):.0f}/{duration:g} s")
            next_note += 10
        time.sleep(0.5)


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
