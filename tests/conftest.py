"""Shared fixtures: real topologies started by the project's own launcher (no hand-rolled setup)."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from http_browser import poll
from process_guard import refusing_processes, starts_processes
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from causal_client import CausalClient
from services.launcher.cluster import Cluster
from services.launcher.redis_binary import find_redis_server
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = ROOT / "topologies"
_port_blocks = itertools.count(0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Unmarked tests run with process creation refused (tests/process_guard.py)."""
    if starts_processes(item):
        yield
        return
    with refusing_processes(item.nodeid):
        yield


def _block_free(base: int, span: int = 200) -> bool:
    for port in range(base, base + span):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def free_base_port() -> int:
    """A base port whose block of 200 ports is unused (one block per cluster in this run).

    Blocks stay below 32768, where Linux's ephemeral ports for outgoing connections start: an
    outgoing connection (a health check, say) could otherwise take a port a cluster needs."""
    start = 10000 + (os.getpid() % 20) * 1000
    while True:
        base = start + next(_port_blocks) * 200
        if base + 200 > 32768:
            base = 10000 + (base % 22000)
        if _block_free(base):
            return base


def load_topology(name_or_dict: str | dict, **overrides) -> Topology:
    if isinstance(name_or_dict, dict):
        data = dict(name_or_dict)
    else:
        data = Topology.load(TOPOLOGIES / name_or_dict).model_dump()
    data.update(overrides)
    if "base_port" not in overrides:
        data["base_port"] = free_base_port()
    return Topology.from_dict(data)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Factory: ``launch("two-region.toml", protocol=...)`` starts a cluster, stopped at teardown."""
    clusters: list[Cluster] = []

    def start(name_or_dict: str | dict = "two-region.toml", **overrides) -> Cluster:
        topology = load_topology(name_or_dict, **overrides)
        cluster = Cluster(topology, tmp_path / f"run{len(clusters)}")
        clusters.append(cluster)
        return cluster.start()

    yield start
    for cluster in clusters:
        cluster.stop()


@pytest.fixture(scope="module")
def two_regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One two-region cluster shared by a test module (tests use distinct keys)."""
    cluster = Cluster(load_topology("two-region.toml"), tmp_path_factory.mktemp("two-regions"))
    with cluster:
        yield cluster


@pytest.fixture
def client_for() -> Iterator[Callable[[Cluster], CausalClient]]:
    clients: list[CausalClient] = []

    def make(cluster: Cluster, site: str | None = None) -> CausalClient:
        region = cluster.topology.region_names[0]
        client = CausalClient.connect(cluster.topology.client_address(region), site=site)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


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


def expect_caught(protocol: str, failures: int, rounds: int, what: str) -> None:
    """A causal protocol: no failure at all. Eventual: at least one, or the check cannot catch
    anything."""
    if protocol == "eventual":
        assert failures >= 1, f"eventual: {what} never broken in {rounds} rounds; the test cannot fail"
    else:
        assert failures == 0, f"{protocol}: {what} broken in {failures} of {rounds} rounds"


def eventually(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.01):
    """Polls until ``predicate()`` is truthy; returns its value or fails with a clear message."""
    return poll(predicate, timeout, "condition", interval)


def unique(prefix: str) -> str:
    """A key no other test uses (tests share module-scoped clusters)."""
    return f"{prefix}-{time.monotonic_ns()}"


def metric_samples(cluster: Cluster, region: str) -> list[Sample]:
    """Every sample a region's /metrics serves (all its processes summed, dead ones included)."""
    url = cluster.topology.metrics_url(region)
    from services.auth import http_headers

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


@pytest.fixture
def store_calls(monkeypatch) -> list[str]:
    """Every store RPC the process's sessions make (method names), still made for real."""
    from causal_client.client import Session

    calls: list[str] = []
    real_call = Session._call

    def counting(self, method, request, *args, **kwargs):
        calls.append(method)
        return real_call(self, method, request, *args, **kwargs)

    monkeypatch.setattr(Session, "_call", counting)
    return calls


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real Redis server of its own."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(10)
