"""Every deadline a test waits under, from one place, scaled to the machine; and a record of how
much of its deadline each wait used (the close calls, tests/helpers/close_calls.py).

A deadline written in a test is what the wait needs on the machine the suite is tuned for (a
quiet 2-core box running two test files at a time). ``scaled(seconds)`` stretches it by the
machine's slowdown, so that a slower or busier machine waits longer instead of failing:

- ``SATURN_TEST_SLOWDOWN=<factor>`` sets it (3: every deadline three times as long);
- unset, it is measured once at the start of the run (``measure_slowdown``: a fixed piece of
  CPU-bound Python timed against what it takes on a quiet machine, and the CPU other processes
  keep busy), never below 1. The run's
  first process exports what it measured in that variable, so every test worker and every
  process the tests start agree on one factor.

Only deadlines scale: a window in which something must *not* happen, a hold that sets up an
arrival order, or a poll's interval is written as it is meant.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

SLOWDOWN_ENV = "SATURN_TEST_SLOWDOWN"
#: seconds one round of ``_cpu_round`` takes on a quiet core of the machine the suite is tuned for
#: (the 2-core CI machine, Python 3.11; median of 9)
QUIET_ROUND_S = 0.045
MOST = 10.0  # a machine this much slower than the reference is broken, not slow

T = TypeVar("T")


def _cpu_round() -> float:
    """Seconds of one fixed piece of interpreter work (what the suite's Python spends its time on:
    bytecode, small objects, dicts)."""
    began = time.perf_counter()
    table: dict[int, int] = {}
    for i in range(150_000):
        table[i & 1023] = table.get(i & 1023, 0) + i * 3
    str(sorted(table.values()))
    return time.perf_counter() - began


def busy_elsewhere(seconds: float = 0.5) -> float:
    """The share of the machine's CPU time that other processes used over ``seconds`` while this
    one slept (0: idle, 1: every core busy), from /proc/stat; 0 where there is none."""

    def idle_and_total() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields[:8])  # idle + iowait; user..steal

    try:
        idle0, total0 = idle_and_total()
        time.sleep(seconds)
        idle1, total1 = idle_and_total()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def measure_slowdown(rounds: int = 9) -> float:
    """How many times slower this machine runs the suite now than a quiet reference one: the
    slower of two readings, at least 1, at most MOST. A fixed piece of interpreter work against
    its time on the reference (a slower core); and the CPU that other processes keep busy (a
    busy loop beside the suite, which a single short piece of work hardly feels: the scheduler
    gives it a core of its own for a while, where the suite's many processes would share)."""
    others = 1 + busy_elsewhere()
    taken = statistics.median(_cpu_round() for _ in range(rounds))
    return min(MOST, max(1.0, taken / QUIET_ROUND_S, others))


_slowdown: float | None = None
source = ""  # how this process knows the factor: "measured", or "set" (by a person or the run)


def slowdown() -> float:
    """The factor every deadline is multiplied by (module doc)."""
    global _slowdown, source
    if _slowdown is None:
        given = os.environ.get(SLOWDOWN_ENV, "").strip()
        source = "set" if given else "measured"
        if given:
            try:
                _slowdown = float(given)
            except ValueError:
                raise ValueError(
                    f"{SLOWDOWN_ENV}={given!r}: a number (2.5: deadlines 2.5 times as long)"
                ) from None
            if not 0 < _slowdown <= 100:
                raise ValueError(f"{SLOWDOWN_ENV}={given!r}: a factor between 0 and 100")
        else:
            _slowdown = measure_slowdown()
            os.environ[SLOWDOWN_ENV] = f"{_slowdown:.2f}"  # (the workers and processes started later)
    return _slowdown


def scaled(seconds: float) -> float:
    """A deadline of ``seconds`` on the reference machine, on this one."""
    return seconds * slowdown()


# -- what each wait used of its deadline --------------------------------------------------------
@dataclass(frozen=True)
class Use:
    """One wait: what it waited for, where, how long it took against its (scaled) deadline."""

    what: str
    where: str  # the test's line that waited (file:line)
    took_s: float
    deadline_s: float
    met: bool

    @property
    def share(self) -> float:
        return self.took_s / self.deadline_s if self.deadline_s > 0 else 1.0


_closest: Use | None = None  # the current test's wait that came closest to its deadline


def record(use: Use) -> None:
    global _closest
    if _closest is None or use.share > _closest.share:
        _closest = use


def take_closest() -> Use | None:
    """The closest call since the last ``take_closest`` (a test's), and forget it."""
    global _closest
    found, _closest = _closest, None
    return found


_HELPERS = {str(Path(__file__).with_name(name)) for name in ("deadlines.py", "waiting.py", "http_browser.py")}


def _caller() -> str:
    """The first frame outside the wait helpers: the test (or fixture) that waited."""
    frame = sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename in _HELPERS:
        frame = frame.f_back
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


class Deadline:
    """A deadline for a wait written by hand (one that does more than poll a predicate):
    ``deadline = Deadline(10, "the row at b")``; ``deadline.left()`` for a call's own timeout,
    ``deadline.expired()``, ``deadline.fail()`` raises; ``deadline.met()`` records how much was
    used. ``seconds`` is the reference machine's, scaled here. A ``probe``'s deadline passing is
    a finding the test expects may come (a naive protocol's lost label), not a close call: only
    its waits that are met are recorded."""

    def __init__(self, seconds: float, what: str, probe: bool = False):
        self.what = what
        self.probe = probe
        self.seconds = scaled(seconds)
        self.began = time.monotonic()
        self.where = _caller()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def left(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def expired(self) -> bool:
        return self.elapsed() > self.seconds

    def met(self) -> None:
        record(Use(self.what, self.where, self.elapsed(), self.seconds, True))

    def fail(self, detail: str = "") -> AssertionError:
        """The error to raise: what was not reached, in how long (and the factor, so a reader
        knows whether the machine was slow)."""
        if not self.probe:
            record(Use(self.what, self.where, self.elapsed(), self.seconds, False))
        factor = f" ({self.seconds / slowdown():.0f} s x{slowdown():.2f})" if slowdown() != 1 else ""
        return AssertionError(
            f"{self.what}: not within {self.seconds:.1f} s{factor}{': ' + detail if detail else ''}"
        )


def wait_for(
    predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.05, probe: bool = False
) -> T:
    """Polls ``predicate`` every ``interval`` until it is truthy, for ``timeout`` seconds of the
    reference machine (scaled); returns its value, or fails saying ``what`` was not reached
    (``probe``: see ``Deadline``)."""
    deadline = Deadline(timeout, what, probe)
    while True:
        value = predicate()
        if value:
            deadline.met()
            return value
        if deadline.expired():
            raise deadline.fail()
        time.sleep(interval)
