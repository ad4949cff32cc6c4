"""Reading the services' /metrics: the visibility histograms each region records for the updates
it receives, which is where remote-update latency is measured (not in the benchmark's clients)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from prometheus_client.parser import text_string_to_metric_families

from loadtest.harness.stats import Histogram
from services.auth import fetch_metrics
from services.topology import Topology

VISIBILITY_METRIC = "causal_visibility_seconds"

Pair = tuple[str, str]  # (origin region, region where the update became visible)


def lines_of(text: str, metric: str) -> str:
    """The lines of one /metrics page that are about ``metric``. A region's page also holds its
    label stages' histograms and its serializers' (thousands of lines): parsing all of it at a
    window's edge took seconds on two loaded cores, so the window's CPU was read late."""
    return "\n".join(
        line
        for line in text.splitlines()
        if line.startswith(metric) or (line.startswith("#") and line.split(" ", 3)[2:3] == [metric])
    )


def parse_histograms(text: str, metric: str, keys: Sequence[str]) -> dict[tuple[str, ...], Histogram]:
    """The histograms of ``metric`` in one /metrics page, keyed by the values of label ``keys``."""
    buckets: dict[tuple[str, ...], list[tuple[float, float]]] = {}
    sums: dict[tuple[str, ...], float] = {}
    counts: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families(lines_of(text, metric) + "\n"):
        if family.name != metric:
            continue
        for sample in family.samples:
            key = tuple(sample.labels[k] for k in keys)
            if sample.name.endswith("_bucket"):
                buckets.setdefault(key, []).append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                sums[key] = sample.value
            elif sample.name.endswith("_count"):
                counts[key] = sample.value
    return {
        key: Histogram(tuple(sorted(b)), sums.get(key, 0.0), counts.get(key, 0.0))
        for key, b in buckets.items()
    }


def parse_visibility(text: str) -> dict[Pair, Histogram]:
    """The visibility histograms in one /metrics page, keyed by (origin, region)."""
    return parse_histograms(text, VISIBILITY_METRIC, ("origin", "region"))  # type: ignore[return-value]


def pages(topology: Topology) -> list[str]:
    """Every region's /metrics page (one read each: several parsers may share them)."""
    texts = []
    for region in topology.region_names:
        texts.append(fetch_metrics(topology.metrics_url(region), 10))
    return texts


def parsed(texts: Sequence[str], parse: Callable[[str], dict]) -> dict:
    """``parse`` applied to every region's page, merged (each region reports its own)."""
    snapshot: dict = {}
    for text in texts:
        snapshot.update(parse(text))
    return snapshot


def scrape(topology: Topology, parse: Callable[[str], dict]) -> dict:
    """``parse`` applied to every region's /metrics page, merged."""
    return parsed(pages(topology), parse)


def scrape_visibility(topology: Topology) -> dict[Pair, Histogram]:
    """Every region's visibility histograms (each region reports the updates it received)."""
    return scrape(topology, parse_visibility)
