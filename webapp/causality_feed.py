"""What the live causality page shows: the tree's layout, and frames of what moved.

Every region's services publish Prometheus counters (services/metrics.py): remote updates made
visible here by origin, the sum and count of their visibility latency, and the labels the sink
sent. A frame is the difference between two scrapes of every region, a second apart:
per ordered pair of regions, the updates that became visible and their mean visibility latency
in that second; the page animates them along the path a label takes (the serializer tree under
Saturn, the direct link otherwise).
"""

from __future__ import annotations

import http.client
import math
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from services.auth import fetch_metrics
from services.topology import Topology

#: a region's /metrics sums every process's file of counters: on a busy 2-core machine that took
#: over 3 s, and a region whose scrape timed out showed as down, its frame lost (the live page's
#: dots never came for a tweet made then); frames wait for a slow scrape instead
SCRAPE_TIMEOUT_S = 5.0
WATCHED = {
    "causal_remote_updates_applied_total": "applied",
    "causal_visibility_seconds_sum": "visibility_sum",
    "causal_visibility_seconds_count": "visibility_count",
}


@dataclass
class Counts:
    """One region's counters, by origin (``sent``: labels its sink sent up the tree)."""

    up: bool = True
    by_origin: dict[str, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )
    sent: float = 0.0


def parse(text: str) -> Counts:
    counts = Counts()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in WATCHED and "origin" in sample.labels:
                counts.by_origin[sample.labels["origin"]][WATCHED[sample.name]] += sample.value
            elif sample.name == "causal_labels_sent_total":
                counts.sent += sample.value
    return counts


def scrape(topology: Topology, region: str) -> Counts:
    try:
        return parse(fetch_metrics(topology.metrics_url(region), SCRAPE_TIMEOUT_S))
    except (OSError, ValueError, http.client.HTTPException):  # down, or not answering as it should
        return Counts(up=False)


def layout(topology: Topology) -> dict:
    """Where the page draws each node (0..1 coordinates), the tree's edges, and for each ordered
    pair of regions the nodes a label passes (the direct link without a tree)."""
    regions = topology.region_names
    neighbours = topology.tree_neighbours if topology.traits.tree else {}
    serializers = [n for n in neighbours if n not in regions]
    if not serializers:  # no tree: the regions on a circle
        angles = {r: 2 * math.pi * i / len(regions) - math.pi / 2 for i, r in enumerate(regions)}
        places = {r: (0.5 + 0.4 * math.cos(a), 0.5 + 0.4 * math.sin(a)) for r, a in angles.items()}
        return {"nodes": [node(r, "region", places[r]) for r in regions], "edges": [],
                "paths": {f"{a}>{b}": [a, b] for a in regions for b in regions if a != b}}  # fmt: skip
    root = max(serializers, key=lambda n: (len(neighbours[n]), n))
    depth: dict[str, int] = {root: 0}
    order: list[str] = []
    parent: dict[str, str | None] = {root: None}
    stack = [root]
    while stack:
        current = stack.pop()
        order.append(current)
        for nxt in reversed(neighbours[current]):
            if nxt not in depth:
                depth[nxt], parent[nxt] = depth[current] + 1, current
                stack.append(nxt)
    leaves = [n for n in order if all(depth.get(c, -1) <= depth[n] for c in neighbours[n])]
    x = {leaf: (i + 0.5) / len(leaves) for i, leaf in enumerate(leaves)}
    for n in sorted(order, key=lambda n: -depth[n]):  # a parent above the middle of its children
        children = [c for c in neighbours[n] if parent.get(c) == n]
        if children:
            x[n] = sum(x[c] for c in children) / len(children)
    deepest = max(depth.values()) or 1
    places = {n: (x[n], 0.12 + 0.76 * depth[n] / deepest) for n in order}
    return {
        "nodes": [node(n, "region" if n in regions else "serializer", places[n]) for n in order],
        "edges": [[e.a, e.b] for e in topology.tree],
        "paths": {f"{a}>{b}": tree_path(neighbours, a, b) for a in regions for b in regions if a != b},
    }


def node(name: str, kind: str, place: tuple[float, float]) -> dict:
    return {"name": name, "kind": kind, "x": round(place[0], 4), "y": round(place[1], 4)}


def tree_path(neighbours: dict[str, tuple[str, ...]], a: str, b: str) -> list[str]:
    """The nodes from ``a`` to ``b`` along the tree."""
    previous: dict[str, str | None] = {a: None}
    queue = [a]
    while queue:
        current = queue.pop(0)
        for nxt in neighbours.get(current, ()):
            if nxt not in previous:
                previous[nxt] = current
                queue.append(nxt)
    path: list[str] = []
    at: str | None = b
    while at is not None:
        path.append(at)
        at = previous.get(at)
    return path[::-1]


def frame(before: dict[str, Counts], now: dict[str, Counts]) -> dict:
    """What changed between two scrapes: per pair, updates made visible and their mean latency."""
    pairs = {}
    for region, counts in now.items():
        old = before.get(region, Counts())
        for origin, values in counts.by_origin.items():
            if origin == region:
                continue
            was = old.by_origin.get(origin, {})
            applied = values.get("applied", 0) - was.get("applied", 0)
            seen = values.get("visibility_count", 0) - was.get("visibility_count", 0)
            spent = values.get("visibility_sum", 0) - was.get("visibility_sum", 0)
            total_seen, total_spent = values.get("visibility_count", 0), values.get("visibility_sum", 0)
            pairs[f"{origin}>{region}"] = {
                "applied": max(0, round(applied)),
                "visibility_ms": round(1000 * spent / seen, 1) if seen > 0 else None,
                "mean_ms": round(1000 * total_spent / total_seen, 1) if total_seen else None,
                "total": round(values.get("applied", 0)),
            }
    return {"regions": {r: {"up": c.up, "sent": max(0, round(c.sent - before.get(r, Counts()).sent))}
                        for r, c in now.items()}, "pairs": pairs}  # fmt: skip


def scrape_all(topology: Topology, pool: ThreadPoolExecutor) -> dict[str, Counts]:
    regions = topology.region_names
    return dict(zip(regions, pool.map(lambda r: scrape(topology, r), regions), strict=True))


def frames(topology: Topology, count: int, every_s: float, sleep=None) -> Iterator[dict]:
    """``count`` frames, ``every_s`` apart (the first after one interval)."""
    sleep = sleep or time.sleep
    with ThreadPoolExecutor(max_workers=len(topology.region_names)) as pool:
        before = scrape_all(topology, pool)
        for _ in range(count):
            sleep(every_s)
            now = scrape_all(topology, pool)
            yield frame(before, now)
            before = baseline(before, now)


def baseline(before: dict[str, Counts], now: dict[str, Counts]) -> dict[str, Counts]:
    """What the next frame is measured from: each region's last scrape that answered (one that
    failed would make the next good one count everything since the start as new)."""
    return {region: counts if counts.up else before.get(region, counts) for region, counts in now.items()}
