"""Clusters a test module shares, clients connected to them, and their regions' metrics."""

from __future__ import annotations

import contextlib
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from causal_client import CausalClient
from helpers.topologies import load_topology
from services.auth import http_headers
from services.launcher.cluster import Cluster


@contextlib.contextmanager
def cluster_under(
    protocol: str, topology: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A module's cluster: ``topology`` under ``protocol``, stopped when the module is done."""
    topo = load_topology(topology, protocol=protocol)
    with Cluster(topo, tmp_path_factory.mktemp(f"{topo.name}-{protocol}")) as cluster:
        yield cluster


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
    with urllib.request.urlopen(urllib.request.Request(url, headers=http_headers()), timeout=5) as reply:
        text = reply.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def metric_sum(cluster: Cluster, at: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples carrying ``labels``, as region ``at`` serves them."""
    return sum(
        s.value
        for s in metric_samples(cluster, at)
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )
