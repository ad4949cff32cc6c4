"""CPU time of the cluster's processes by role over a window: what each part of the system costs
per operation, and what a protocol costs when nothing happens.

Throughput on a small shared machine swings by a third between identical runs; CPU seconds per
operation, summed over every process involved, hardly move, and they say *where* a protocol's
price is paid (frontend, replication, label sink, serializers, ...). Read from ``/proc`` (Linux);
elsewhere the figures are left out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

CLIENT_ROLE = "bench client"
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_INDEX = re.compile(r"\d+$")

CpuByRole = dict[str, float]  # role -> CPU seconds (or, for idle, a fraction of one core)
CpuByProcess = dict[str, float]  # process name (as the launcher names it) -> CPU seconds


def region_of(process: str) -> str | None:
    """'virginia.frontend0' -> 'virginia'; serializers and the benchmark's clients: None."""
    prefix, dot, _ = process.partition(".")
    return prefix if dot and prefix != "serializer" else None


def by_role(cpu: CpuByProcess) -> CpuByRole:
    totals: CpuByRole = {}
    for process, seconds in cpu.items():
        role = CLIENT_ROLE if process == CLIENT_ROLE else role_of(process)
        totals[role] = totals.get(role, 0.0) + seconds
    return totals


def of_region(cpu: CpuByProcess, region: str) -> float:
    """CPU of one region's own processes (a datacenter: not the clients, not the serializers)."""
    return sum(seconds for process, seconds in cpu.items() if region_of(process) == region)


def role_of(process: str) -> str:
    """'virginia.frontend0' -> 'frontend', 'serializer.s-eu' -> 'serializer', 'ireland.redis0' ->
    'redis': a role is what a process does, whatever its region or index."""
    prefix, _, name = process.partition(".")
    if prefix == "serializer":
        return "serializer"
    return _INDEX.sub("", name or prefix)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name; None if it is gone or not Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()  # the command name may contain spaces


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far; None if it is gone or /proc is not there."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def process_table() -> dict[int, tuple[int, float]]:
    """Every live process: pid -> (parent pid, CPU seconds of it and its reaped children), from
    one pass over /proc (one snapshot)."""
    table: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            table[int(entry.name)] = (
                int(fields[1]),
                sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICKS_PER_S,
            )
    return table


def tree_cpu_seconds(
    pid: int, table: Mapping[int, tuple[int, float]], children: Mapping[int, list[int]]
) -> float | None:
    """CPU seconds of a process and all its descendants, live or already reaped: gunicorn's and
    Celery's workers are forked children, which a process's own figures leave out."""
    if pid not in table:
        return None
    total, stack = 0.0, [pid]
    while stack:
        process = stack.pop()
        total += table[process][1]
        stack.extend(children.get(process, ()))
    return total


class CpuMeter:
    """Snapshots of the CPU time of named processes with their descendants, and of the
    benchmark's clients: this process with its children that are not named (client processes;
    the named ones are the cluster)."""

    def __init__(self, processes: Mapping[str, int]):
        self.pids = dict(processes)
        self.available = cpu_seconds(os.getpid()) is not None

    def snapshot(self) -> CpuByProcess:
        table = process_table() if self.available else {}
        children: dict[int, list[int]] = {}
        for child, (parent, _) in table.items():
            children.setdefault(parent, []).append(child)
        cpu = {
            name: seconds
            for name, pid in self.pids.items()
            if (seconds := tree_cpu_seconds(pid, table, children)) is not None
        }
        if (own := self._clients(table, children)) is not None:
            cpu[CLIENT_ROLE] = own
        return cpu

    def _clients(
        self, table: Mapping[int, tuple[int, float]], children: Mapping[int, list[int]]
    ) -> float | None:
        """This process and its descendants that are not the cluster's (client processes)."""
        if not table:
            return cpu_seconds(os.getpid())
        cluster = set(self.pids.values())
        total, stack = 0.0, [os.getpid()]
        while stack:
            process = stack.pop()
            if process in cluster or process not in table:
                continue
            total += table[process][1]
            stack.extend(children.get(process, ()))
        return total


def used_between(before: CpuByProcess, after: CpuByProcess) -> CpuByProcess:
    """CPU seconds per process between two snapshots (processes present in both)."""
    return {name: max(0.0, after[name] - before[name]) for name in after if name in before}


def per_operation_us(cpu: dict[str, float], operations: int) -> dict[str, float]:
    """CPU microseconds per operation, per key (role or process)."""
    return {role: 1e6 * seconds / operations for role, seconds in cpu.items()} if operations else {}
