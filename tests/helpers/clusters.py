"""Clusters a test module shares, clients connected to them, and their regions' metrics."""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from causal_client import CausalClient, wire
from helpers.deadlines import Deadline, scaled
from helpers.topologies import load_topology
from helpers.waiting import unique
from services.auth import http_headers
from services.launcher.cluster import Cluster
from services.region import gears


@contextlib.contextmanager
def cluster_under(
    protocol: str, topology: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A module's cluster: ``topology`` under ``protocol``, stopped when the module is done."""
    topo = load_topology(topology, protocol=protocol)
    cluster = Cluster(topo, tmp_path_factory.mktemp(f"{topo.name}-{protocol}")).start(timeout=scaled(30))
    try:
        yield cluster
    finally:
        cluster.stop()


@contextlib.contextmanager
def connected_client(cluster: Cluster, entry: str) -> Iterator[CausalClient]:
    """A client with a connection to every region up front (rounds then measure no set-up)."""
    with CausalClient.connect(cluster.topology.client_address(entry)) as client:
        for region in cluster.topology.region_names:
            client.session(region)
        yield client


def metric_samples(cluster: Cluster, region: str) -> list[Sample]:
    """Every sample a region's /metrics serves (all its processes summed, dead ones included)."""
    url = cluster.topology.metrics_url(region)
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=http_headers()), timeout=scaled(5)
    ) as reply:
        text = reply.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def metric_sum(cluster: Cluster, at: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples carrying ``labels``, as region ``at`` serves them."""
    return sum(
        s.value
        for s in metric_samples(cluster, at)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def applied_count(
    cluster: Cluster, at: str, origin: str, at_least: float, before: float = 0.0, timeout: float = 10.0
) -> float:
    """The remote updates from ``origin`` that region ``at`` counts as applied (since ``before``),
    read once the count reaches ``at_least`` or the deadline passes: the receiver counts a batch
    after the store applied it, so a reader can see the data a moment before the count moves. A
    count above ``at_least`` is returned as it is (an update applied twice), not waited away."""

    def count() -> float:
        name = "causal_remote_updates_applied_total"
        return metric_sum(cluster, at, name, region=at, origin=origin) - before

    deadline = Deadline(timeout, f"{at} counting {at_least:g} updates from {origin} applied")
    while (counted := count()) < at_least and not deadline.expired():
        time.sleep(0.05)
    deadline.met()  # (a short count is the caller's assertion to make, with its own message)
    return counted


def region_processes(cluster: Cluster, region: str) -> list[str]:
    """Every process of the region, in start order (stores first)."""
    return [n for n, spec in cluster.specs.items() if spec.region == region]


class Writer:
    """Writes n updates in region a: a distinct column each, and +1 on a counter each."""

    def __init__(self, client: CausalClient, n: int):
        self.session = client.session("a")
        self.n, self.row, self.done = n, unique("crash"), 0
        self.error: Exception | None = None  # what ended it early (a's region gone, say)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        try:
            for i in range(self.n):
                self.session.write("all", self.row, {f"u{i:05d}": str(i)})
                self.session.increment("all", self.row + ":n", "count", 1)
                self.done = i + 1
        except Exception as exc:  # kept for the test to judge, not a thread's traceback
            self.error = exc

    def start(self) -> Writer:
        self.thread.start()
        return self


def bulk_stream_length(cluster: Cluster, region: str, shard: int = 0) -> int:
    """Entries in the bulk stream of ``region``'s ``shard``: what its sender still keeps (it trims
    what every receiver acknowledged)."""
    topology = cluster.topology
    with redis.Redis(host=topology.host, port=topology.redis_port(region, shard)) as store:
        return store.xlen(gears.shard_key(gears.BULK_STREAM, wire.shard_tag(shard)))
