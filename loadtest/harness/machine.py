"""The machine an experiment ran on, printed when it starts and written beside its results
(``machine.json``): every region, serializer and client of an emulated deployment shares its
cores, so a throughput figure is the inverse of what the whole system costs there, and a reader
must know how many cores that was, how busy they were already, and at which commit."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Machine:
    cores: int
    model: str
    memory_gib: float
    load_at_start: float  # the 1-minute load average when the experiment started
    python: str
    commit: str  # the project's commit ("" outside a git checkout)

    def describe(self) -> str:
        return (
            f"machine: {self.cores} cores ({self.model}), {self.memory_gib:.0f} GiB, "
            f"load {self.load_at_start:.2f} at start; Python {self.python}; commit {self.commit or '?'}"
        )


def _model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 0.0


def _commit() -> str:
    """HEAD's commit, read from the git directory's files (no process is started for it)."""
    git = PROJECT_ROOT / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:7]
        ref = head.removeprefix("ref: ")
        if (git / ref).exists():
            return (git / ref).read_text().strip()[:7]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:7]
    except OSError:
        pass
    return ""


def this_machine() -> Machine:
    return Machine(
        cores=os.cpu_count() or 1,
        model=_model(),
        memory_gib=_memory_gib(),
        load_at_start=os.getloadavg()[0],
        python=platform.python_version(),
        commit=_commit(),
    )


def note() -> Machine:
    """Prints the machine (as an experiment starts)."""
    machine = this_machine()
    print(machine.describe(), flush=True)
    return machine


def keep(machine: Machine, out: str | None) -> None:
    """Writes the machine as ``machine.json`` into the experiment's output folder, if it made
    one (an ``--out`` that names a file is left alone)."""
    if out and Path(out).is_dir():
        (Path(out) / "machine.json").write_text(json.dumps(asdict(machine), indent=2))
