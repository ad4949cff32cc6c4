"""Remote-update visibility: paced probe writes, waiting until replication has delivered them all
(the histograms are only complete then), and the per-pair figures between two /metrics snapshots."""

from __future__ import annotations

import time
from collections.abc import Sequence

from causal_client import CausalClient
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.results import VisibilityRow
from loadtest.harness.stats import Histogram, to_ms
from loadtest.harness.workload import COLUMN, Workload
from services.topology import Topology

DRAIN_TIMEOUT_S = 60.0  # how long replication may lag behind before updates count as missing


def probe_writes(client: CausalClient, region: str, work: Workload, writes: int, rate: float) -> None:
    """``writes`` rows written at ``region``, paced at ``rate``/s: open loop rather than flat out,
    so that what is measured is propagation, not a queue of the benchmark's own making."""
    session = client.session(region)
    started = time.perf_counter()
    for i in range(writes):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        session.write(work.group, f"probe:{region}:{i % work.keys}", {COLUMN: work.value})


def expected_visible(topology: Topology, group: str, writes_by_origin: dict[str, int]) -> dict[Pair, int]:
    """How many updates each (origin, region) pair must see: every write goes to every replica."""
    return {
        pair: count
        for origin, count in writes_by_origin.items()
        if count
        for pair in remote_pairs(topology, group, origin)
    }


def remote_pairs(topology: Topology, group: str, origin: str) -> list[Pair]:
    """``origin`` with each other replica of ``group``: where its writes must become visible."""
    return [(origin, region) for region in topology.group_members[group] if region != origin]


def wait_replicated(
    topology: Topology, baseline: dict[Pair, Histogram], expected: dict[Pair, int], timeout: float
) -> tuple[dict[Pair, Histogram], dict[Pair, int]]:
    """Polls /metrics until every pair has seen what was written since ``baseline``, so that the
    histograms are complete (replication is asynchronous). Returns the snapshot and any pair
    still short at the deadline (lost or very late updates: reported, not hidden)."""
    deadline = time.monotonic() + timeout
    while True:
        snapshot = scrape_visibility(topology)
        short = {}
        for pair, count in expected.items():
            seen = _count(snapshot.get(pair)) - _count(baseline.get(pair))
            if seen < count:
                short[pair] = int(count - seen)
        if not short or time.monotonic() > deadline:
            return snapshot, short
        time.sleep(0.2)


def _count(histogram: Histogram | None) -> float:
    return histogram.count if histogram else 0.0


def visibility_rows(
    topology: Topology, after: dict[Pair, Histogram], before: dict[Pair, Histogram], pairs: Sequence[Pair]
) -> list[VisibilityRow]:
    """Per pair, what was observed between two snapshots, next to the link's configured latency."""
    rows = []
    for origin, region in pairs:
        current = after.get((origin, region))
        delta = current.minus(before.get((origin, region))) if current else Histogram(())
        rows.append(
            VisibilityRow(
                origin=origin,
                region=region,
                updates=int(delta.count),
                configured_ms=topology.region_latency_ms(origin, region),
                mean_ms=to_ms(delta.mean),
                p50_ms=to_ms(delta.quantile(0.50)),
                p90_ms=to_ms(delta.quantile(0.90)),
                p99_ms=to_ms(delta.quantile(0.99)),
                cumulative=delta.cumulative_ms(),
            )
        )
    return rows
