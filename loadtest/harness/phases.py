"""Visibility phase by phase while something is done to a running cluster (a tree reconfigured,
a serializer killed): a recorder scrapes every region's visibility histograms on a timer for a
timeline, and around each phase for its table row. Shared by the reconfiguration and failover
benches."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from loadtest.harness.metrics import scrape_visibility
from loadtest.harness.probes import extra, p99
from loadtest.harness.report import say
from services.topology import Topology


@dataclass
class Phase:
    name: str
    seconds: float
    updates: int
    extra_ms: float | None  # mean visibility minus each pair's bulk latency
    p99_ms: float | None


@dataclass
class Sample:
    t: float  # seconds since the first sample
    updates: int
    extra_ms: float | None


class Recorder:
    """Scrapes every ``interval`` in a thread: the timeline; and snapshots at phase boundaries."""

    def __init__(self, topology: Topology, interval: float):
        self.topology, self.interval = topology, interval
        self.samples: list[Sample] = []
        self.spans: list[tuple[str, float, float]] = []  # switches: (name, start, end)
        self.phases: list[Phase] = []
        self.stopping = threading.Event()
        self.began = time.monotonic()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        self.began = time.monotonic()
        last = scrape_visibility(self.topology)
        while not self.stopping.wait(self.interval):
            now = scrape_visibility(self.topology)
            updates, excess = extra(self.topology, now, last)
            self.samples.append(Sample(round(time.monotonic() - self.began, 3), updates, excess))
            last = now

    def phase(self, name: str, work, switch: bool = False) -> None:
        """Runs ``work()`` as one phase; its visibility goes in the table (a switch: in the plot too)."""
        say(f"  {name} ...")
        then, started_at = scrape_visibility(self.topology), time.monotonic()
        work()
        ended = time.monotonic()
        now = scrape_visibility(self.topology)
        updates, excess = extra(self.topology, now, then)
        self.phases.append(Phase(name, round(ended - started_at, 2), updates, excess, p99(now, then)))
        if switch:
            self.spans.append((name, started_at - self.began, ended - self.began))
