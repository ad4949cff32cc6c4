"""Shared fixtures: real topologies started by the project's own launcher (no hand-rolled setup).
Helpers that are not fixtures live in the ``helpers`` package."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.close_calls import CloseCalls
from helpers.core_share import CoreShare
from helpers.process_guard import refusing_processes, starts_processes
from helpers.topologies import load_topology

from causal_client import CausalClient
from loadtest.harness.ports import SLICE_ENV
from services.launcher.cluster import Cluster
from services.launcher.redis_binary import find_redis_server


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(CoreShare(), "core-share")  # tests/helpers/core_share.py
    config.pluginmanager.register(CloseCalls(), "close-calls")  # tests/helpers/close_calls.py
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):  # ports of its own (loadtest/harness/ports.py)
        os.environ[SLICE_ENV] = f"{int(worker.removeprefix('gw'))}/{os.environ['PYTEST_XDIST_WORKER_COUNT']}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Unmarked tests run with process creation refused (tests/helpers/process_guard.py)."""
    if starts_processes(item):
        yield
        return
    with refusing_processes(item.nodeid):
        yield


# Variables that switch a whole process's behaviour (TLS on every client it opens): a test that
# leaves one set turns every later test in the process into a TLS client, far from the cause.
_PROCESS_WIDE_ENV = ("SATURN_TLS_DIR", "SATURN_TLS_IDENTITY", "SATURN_INSECURE")
_ENV_BEFORE = pytest.StashKey[dict[str, str | None]]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    module = item.getparent(pytest.Module) or item
    if _ENV_BEFORE not in module.stash:
        module.stash[_ENV_BEFORE] = {name: os.environ.get(name) for name in _PROCESS_WIDE_ENV}
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """When a module's last test is torn down (its module-scoped fixtures with it): a module that
    leaves a process-wide variable changed errors there, and the variable is put back for the
    modules after it."""
    result = yield
    module = item.getparent(pytest.Module) or item
    if nextitem is not None and (nextitem.getparent(pytest.Module) or nextitem) is module:
        return result
    before = module.stash.get(_ENV_BEFORE, None)
    after = {name: os.environ.get(name) for name in _PROCESS_WIDE_ENV}
    if before is None or after == before:
        return result
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    pytest.fail(f"{module.nodeid} left the environment changed: {before} -> {after}", pytrace=False)


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
    """One two-region cluster shared by a test module (tests use distinct keys). It takes WAN
    faults, so that a test can hold the link to fix an arrival order (test_data_model.py)."""
    folder = tmp_path_factory.mktemp("two-regions")
    cluster = Cluster(load_topology("two-region.toml"), folder, wan_control=True)
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
