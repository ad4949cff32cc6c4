"""Probe writes at every region and what the regions' visibility histograms say about them:
shared by the benchmarks that watch visibility while something changes (a reconfiguration) or
compare trees (Fig. 4)."""

from __future__ import annotations

import threading
import time

from causal_client import CausalClient
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.stats import Histogram, to_ms
from services.topology import Topology


class Prober:
    """Paced writes at every region (open loop, ``rate`` per second each) until stopped.

    Each write follows a read of another region's probe row (round robin), as a client of the
    paper's workload reads before it writes: a probe then depends on other regions' updates,
    which a protocol tracking dependencies precisely (Cure's vectors) must wait for at the
    destination, as it would for any real client. A probe that only ever wrote would depend on
    nothing but its own region's past: Cure's best case, not its usual one."""

    def __init__(self, topology: Topology, rate: float):
        self.topology, self.rate = topology, rate
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self.run, args=(region,), daemon=True) for region in topology.region_names
        ]

    def run(self, region: str) -> None:
        with CausalClient.connect(self.topology.client_address(region)) as client:
            session, i, started_at = client.session(region), 0, time.perf_counter()
            group = next(iter(self.topology.group_members))
            members = self.topology.group_members[group]
            others = [r for r in self.topology.region_names if r != region and r in members]
            while not self.stopping.is_set():
                if others:
                    session.read(group, f"probe:{others[i % len(others)]}:{i % 100}", ["v"])
                session.write(group, f"probe:{region}:{i % 100}", {"v": str(i)})
                i += 1
                self.stopping.wait(max(0.0, started_at + i / self.rate - time.perf_counter()))

    def __enter__(self) -> Prober:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(30)


Snapshot = dict[Pair, Histogram]


def wait_flowing(topology: Topology, settle_s: float = 2.0, timeout: float = 30.0) -> None:
    """Until every pair has made an update visible, then ``settle_s`` more: a bulk sender may
    still be in its reconnection backoff when the cluster reports healthy, and a measurement
    started then would count the backlog it ships once connected."""
    pairs = [(a, b) for a in topology.region_names for b in topology.region_names if a != b]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = scrape_visibility(topology)
        if all(seen.get(pair) and seen[pair].count > 0 for pair in pairs):
            break
        time.sleep(0.2)
    time.sleep(settle_s)


def extra(topology: Topology, now: Snapshot, then: Snapshot) -> tuple[int, float | None]:
    """Updates made visible between two snapshots, and their mean visibility over bulk latency."""
    count, excess = 0.0, 0.0
    for pair, histogram in now.items():
        delta = histogram.minus(then.get(pair))
        count += delta.count
        excess += delta.sum - delta.count * topology.region_latency_ms(*pair) / 1000
    return int(count), (excess / count * 1000 if count else None)


def merged(now: Snapshot, then: Snapshot, pairs: list[Pair] | None = None) -> Histogram:
    """What ``pairs`` (default: all) observed between two snapshots, as one histogram (the
    regions' histograms share their buckets)."""
    buckets: dict[float, float] = {}
    total_sum = total_count = 0.0
    for pair, histogram in now.items():
        if pairs is not None and pair not in pairs:
            continue
        delta = histogram.minus(then.get(pair))
        for bound, cumulative in delta.buckets:
            buckets[bound] = buckets.get(bound, 0.0) + cumulative
        total_sum, total_count = total_sum + delta.sum, total_count + delta.count
    return Histogram(tuple(sorted(buckets.items())), total_sum, total_count)


def p99(now: Snapshot, then: Snapshot) -> float | None:
    """The p99 of all pairs' visibility together."""
    return to_ms(merged(now, then).quantile(0.99))
