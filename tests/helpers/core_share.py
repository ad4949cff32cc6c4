"""Test files run two at a time (``scripts/test.sh``: pytest-xdist, a file to a worker), except
those marked ``exclusive``, which run alone: they measure throughput, or run containers whose
health checks a busy CPU fails, so a second file beside them on two cores makes them fail, not
just slower. Every other file shares the cores: most wait on emulated WAN latency.

One lock file in the run's cache directory, held from a file's first test until its last one
is torn down (its processes stopped): shared by the other files, alone by an exclusive one,
which the files asking after it wait for (a gate file).
It is taken outside pytest-timeout's clock (this hook wraps the timeout's), so a file waiting
for an exclusive one to finish is not a test that timed out. Without workers, nothing to share.

The files are handed out longest first (``longest_first``; scripts/test.sh turns off xdist's own
order, which puts the files with the most tests first and left the soak, one long test, running
alone at the end): the exclusive ones (the other worker waits meanwhile, whenever they come),
then the files known to take long (LONG_FILES, seconds measured in a two-worker run), then the rest.

The run ends with the files that took longest and those that cost the most CPU: the worker's own
and its children's (every cluster process a file started and stopped; not what Docker's daemon
runs for it), read at the file's first test and after its last teardown.
On two cores a file's CPU, more than its wall time, is what it takes from the files beside it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import IO

import pytest

LONG_FILES = {  # seconds each took in a run with two workers (2026-12-03, fd575fc); a rough order is enough
    "test_compose_docker.py": 383, "test_counting_benches.py": 241, "test_web_browser.py": 235,
    "test_soak.py": 220, "test_transactions.py": 173, "test_web_regions.py": 153,
    "test_figure_benches.py": 150, "test_saturn_faults.py": 124, "test_floor_benches.py": 125,
    "test_loadtest_run.py": 89,
    "test_saturn_causality.py": 86, "test_serializer_replicas.py": 86, "test_reconfigure.py": 67,
    "test_saturn_migration.py": 63, "test_micro_benches.py": 60, "test_tls_wire.py": 53,
    "test_exactly_once.py": 51,
    "test_session_resume.py": 48, "test_web_views.py": 48, "test_launcher.py": 39, "test_bench.py": 37,
    "test_store_cluster.py": 35, "test_web_reactions.py": 34, "test_web_notices_and_deletes.py": 33,
    "test_c3.py": 28, "test_web_accounts.py": 26,
}  # fmt: skip


FILES_SHOWN = 25
CPU_KEY = "file-cpu"


def cpu_so_far() -> float:
    """This process's CPU seconds and its reaped children's, and every live descendant's with its
    own reaped children's: the zygote (services/launcher/zygote.py) lives as long as the worker
    and reaps the services it forks, so their CPU reaches the worker only through it. A process
    alive at the first read and reaped by the second moves from one term to another: counted
    once."""
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return own + sum(_process_cpu(pid) for pid in _descendants(os.getpid()))


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (the zygote is the spawner's child, not the worker's)."""
    found, queue = [], _children(pid)
    while queue:
        child = queue.pop()
        found.append(child)
        queue += _children(child)
    return found


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (the launcher forks from a thread of its own)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # (gone meanwhile)
            continue
    return found


def _process_cpu(pid: int) -> float:
    """A live process's CPU seconds and its reaped children's, from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # (after the command, which may hold spaces)
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def longest_first(items: list[pytest.Item]) -> None:
    """Reorders ``items`` in place, file by file (a file's own tests keep their order)."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.name
        return (0 if item.get_closest_marker("exclusive") else 1, -LONG_FILES.get(name, 0))

    items.sort(key=rank)  # (stable: files of one rank stay in collection order)


class CoreShare:
    def __init__(self) -> None:
        self._lock: IO[str] | None = None
        self._file: str | None = None
        self._cpu_at_start = 0.0

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if "PYTEST_XDIST_WORKER" in os.environ:
            longest_first(items)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
        if "PYTEST_XDIST_WORKER" not in os.environ:
            yield
            return
        here = item.nodeid.split("::", 1)[0]
        if self._file != here:
            self._release()
            self._take(item, alone=item.get_closest_marker("exclusive") is not None)
            self._file = here
            self._cpu_at_start = cpu_so_far()
        yield
        if nextitem is None or nextitem.nodeid.split("::", 1)[0] != here:
            self._release()  # (its module's fixtures are torn down by now)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
        """After a file's last teardown (its module's processes stopped and reaped), the file's CPU
        goes into the report the controller gets."""
        result = yield
        if self._file is not None and (nextitem is None or nextitem.nodeid.split("::", 1)[0] != self._file):
            item.user_properties.append((CPU_KEY, cpu_so_far() - self._cpu_at_start))
        return result

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        """The files that took longest (their tests' setup, call and teardown summed), exclusive
        what LONG_FILES should say, and where the run's time went."""
        if config.getoption("dist", "no") == "no":  # (one file at a time: nothing shared)
            return
        spent: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for reports in terminalreporter.stats.values():
            for report in reports:
                if isinstance(report, pytest.TestReport):
                    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
                    spent[name] = spent.get(name, 0.0) + report.duration
                    for key, value in report.user_properties:
                        if key == CPU_KEY:
                            cpu[name] = cpu.get(name, 0.0) + value
        self._write_top(terminalreporter, f"longest files of {len(spent)} (seconds)", spent)
        if cpu:
            total = sum(cpu.values())
            self._write_top(terminalreporter, f"files by CPU, processes included (of {total:.0f} CPU-s)", cpu)

    @staticmethod
    def _write_top(terminalreporter, title: str, values: dict[str, float]) -> None:
        top = sorted(values.items(), key=lambda kv: -kv[1])[:FILES_SHOWN]
        terminalreporter.write_sep("=", f"the {len(top)} {title}")
        terminalreporter.write_line(", ".join(f'"{name}": {seconds:.0f}' for name, seconds in top))

    def _take(self, item: pytest.Item, alone: bool) -> None:
        """The lock, shared or alone. An exclusive file first holds the gate while it waits, so
        that files asking to share after it wait for it (flock alone would let the other
        worker's files, one after another, keep it out until the end)."""
        cache = getattr(item.config, "cache", None)  # (None under -p no:cacheprovider)
        folder = cache.mkdir("core-share") if cache is not None else Path(tempfile.gettempdir())
        with open(folder / "gate", "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            self._lock = open(folder / "lock", "a")  # noqa: SIM115 (held across hook calls)
            fcntl.flock(self._lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        # (closing the gate's file lets the next file ask)

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # (closing releases the lock)
            self._lock = None
            self._file = None
