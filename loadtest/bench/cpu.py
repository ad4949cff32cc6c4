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


def role_of(process: str) -> str:
    """'virginia.frontend0' -> 'frontend', 'serializer.s-eu' -> 'serializer', 'ireland.redis0' ->
    'redis': a role is what a process does, whatever its region or index."""
    prefix, _, name = process.partition(".")
    if prefix == "serializer":
        return "serializer"
    return _INDEX.sub("", name or prefix)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far; None if it is gone or /proc is not there."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


class CpuMeter:
    """Snapshots of the CPU time of named processes (plus this one, the benchmark's clients)."""

    def __init__(self, processes: Mapping[str, int]):
        self.pids = {name: pid for name, pid in processes.items()}
        self.pids[CLIENT_ROLE] = os.getpid()
        self.available = cpu_seconds(os.getpid()) is not None

    def snapshot(self) -> CpuByRole:
        totals: CpuByRole = {}
        for name, pid in self.pids.items():
            seconds = cpu_seconds(pid)
            if seconds is not None:
                role = CLIENT_ROLE if name == CLIENT_ROLE else role_of(name)
                totals[role] = totals.get(role, 0.0) + seconds
        return totals


def used_between(before: CpuByRole, after: CpuByRole) -> CpuByRole:
    """CPU seconds per role between two snapshots (roles present in both)."""
    return {role: max(0.0, after[role] - before[role]) for role in after if role in before}


def per_operation_us(cpu: CpuByRole, operations: int) -> CpuByRole:
    """CPU microseconds per operation, per role."""
    return {role: 1e6 * seconds / operations for role, seconds in cpu.items()} if operations else {}
