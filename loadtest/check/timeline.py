"""Remote-update visibility over time during a checked run: every second, each region's visibility
histograms (all origins) are read from its /metrics, and the mean of what became visible in that
second is kept. A region whose metrics cannot be read (it is down) leaves a gap."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

from loadtest.harness.metrics import parse_visibility
from services.auth import fetch_metrics
from services.topology import Topology

PERIOD_S = 1.0


class VisibilitySampler(threading.Thread):
    def __init__(self, topology: Topology, clock: float, stop: threading.Event):
        super().__init__(name="visibility-sampler", daemon=True)
        self.topology, self.clock, self.stop = topology, clock, stop
        self.samples: list[tuple[float, str, float | None]] = []  # (t, region, mean ms or None)
        self._last: dict[str, tuple[float, float]] = {}  # region → (sum s, count)

    def totals(self, region: str) -> tuple[float, float] | None:
        url = self.topology.metrics_url(region)
        try:
            histograms = parse_visibility(fetch_metrics(url, 2))
        except (OSError, urllib.error.URLError, ValueError):
            return None
        mine = [h for (_, at), h in histograms.items() if at == region]
        return sum(h.sum for h in mine), sum(h.count for h in mine)

    def run(self) -> None:
        while not self.stop.wait(PERIOD_S):
            at = time.monotonic() - self.clock
            for region in self.topology.region_names:
                totals = self.totals(region)
                mean = None
                if totals is not None:
                    last = self._last.get(region)
                    if last is not None and totals[1] > last[1]:
                        mean = 1000 * (totals[0] - last[0]) / (totals[1] - last[1])
                    self._last[region] = totals
                self.samples.append((at, region, mean))
