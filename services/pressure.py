"""Whether this machine's CPUs are saturated, from Linux's pressure stall information (PSI): the
share of the last second during which some runnable task waited for a CPU (from PSI's cumulative
``total``; its own averages span 10 s and more, too slow to follow a load that starts).

Services that can trade latency for CPU (the label sink batching labels) ask this: when the CPUs
are saturated, every message saved is CPU given back to the work that queues for it, and the
latency a batch adds is small next to that queueing. Where PSI is missing (old kernels, some
containers, other systems) the machine never counts as saturated, so nothing changes there.
"""

from __future__ import annotations

import time
from pathlib import Path

PSI_CPU = Path("/proc/pressure/cpu")
SATURATED_PERCENT = 20.0  # some task waited for a CPU this share of the last second
REFRESH_S = 1.0  # the window: how often the figure is read and recomputed


def some_total_us(text: str) -> int | None:
    """The ``some ... total=`` figure of a PSI file's text (µs stalled since boot), or None."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for field in fields[1:]:
                name, _, value = field.partition("=")
                if name == "total" and value.isdigit():
                    return int(value)
    return None


class CpuPressure:
    """Reads PSI at most once per ``REFRESH_S``; ``saturated()`` is cheap to call often and
    says whether the CPUs were saturated over the last window (False until a window has passed,
    and always where PSI cannot be read)."""

    def __init__(self, path: Path = PSI_CPU, threshold: float = SATURATED_PERCENT):
        self.path = path
        self.threshold = threshold
        self._last: tuple[float, int] | None = None  # (monotonic s, stalled µs) at the last read
        self._tried_at = float("-inf")  # the last read attempt (without PSI, it stays rare too)
        self._saturated = False

    def percent_since_last(self) -> float | None:
        """Reads PSI now: the share of the time since the last read during which some task
        waited for a CPU, in percent (None on the first read or without PSI)."""
        now = time.monotonic()
        try:
            total = some_total_us(self.path.read_text())
        except OSError:
            total = None
        if total is None:
            self._last = None
            return None
        last, self._last = self._last, (now, total)
        if last is None or now <= last[0]:
            return None
        return 100.0 * (total - last[1]) / ((now - last[0]) * 1e6)

    def saturated(self) -> bool:
        now = time.monotonic()
        if now - self._tried_at >= REFRESH_S:
            self._tried_at = now
            percent = self.percent_since_last()
            self._saturated = percent is not None and percent >= self.threshold
        return self._saturated
