"""Reading the services' /metrics: the visibility histograms each region records for the updates
it receives, which is where remote-update latency is measured (not in the benchmark's clients)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from loadtest.bench.stats import Histogram
from services.topology import Topology

VISIBILITY_METRIC = "causal_visibility_seconds"

Pair = tuple[str, str]  # (origin region, region where the update became visible)


def parse_visibility(text: str) -> dict[Pair, Histogram]:
    """The visibility histograms in one /metrics page, keyed by (origin, region)."""
    buckets: dict[Pair, list[tuple[float, float]]] = {}
    sums: dict[Pair, float] = {}
    counts: dict[Pair, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != VISIBILITY_METRIC:
            continue
        for sample in family.samples:
            pair = (sample.labels["origin"], sample.labels["region"])
            if sample.name.endswith("_bucket"):
                buckets.setdefault(pair, []).append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                sums[pair] = sample.value
            elif sample.name.endswith("_count"):
                counts[pair] = sample.value
    return {
        pair: Histogram(tuple(sorted(b)), sums.get(pair, 0.0), counts.get(pair, 0.0))
        for pair, b in buckets.items()
    }


def scrape_visibility(topology: Topology) -> dict[Pair, Histogram]:
    """Every region's visibility histograms (each region reports the updates it received)."""
    snapshot: dict[Pair, Histogram] = {}
    for region in topology.region_names:
        url = f"http://{topology.host}:{topology.metrics_port(region)}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            snapshot.update(parse_visibility(reply.read().decode()))
    return snapshot
