"""Shared by the web-app tests: launched topologies with the web tier, and the in-process Django
(pytest-django's ``client``) pointed at one region of such a topology."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.deadlines import scaled
from helpers.topologies import load_topology
from services.launcher.cluster import Cluster


def start_web_cluster(tmp: Path, topology: str = "demo-3region.toml", **overrides) -> Cluster:
    """A topology with, per region, the store, gunicorn, a Celery worker and its broker."""
    return Cluster(load_topology(topology, **overrides), tmp, web=True).start(timeout=scaled(60))


@pytest.fixture(scope="module")
def web_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """demo-3region under saturn with the web tier, shared by a test module."""
    cluster = start_web_cluster(tmp_path_factory.mktemp("web"))
    try:
        yield cluster
    finally:
        cluster.stop()


def point_django_at(settings, cluster: Cluster, region: str) -> None:
    """Makes the in-process Django (pytest-django's ``settings`` fixture) serve ``region`` of
    ``cluster``: its store, its broker (the cluster's Celery workers run the tasks)."""
    from webapp import context as region_module

    settings.SATURN_TOPOLOGY = str(cluster.topology_file)
    settings.SATURN_REGION = region
    settings.SECRET_KEY = cluster.secret_key  # hand-offs must verify across regions
    region_module.reset()


@pytest.fixture
def django_region(settings, web_cluster) -> Iterator[str]:
    """In-process Django serving the cluster's first region; yields the region's name."""
    from webapp import context as region_module

    region = web_cluster.topology.region_names[0]
    point_django_at(settings, web_cluster, region)
    yield region
    region_module.reset()


FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fast_hashes(settings):
    """A cheap password hasher (PBKDF2 costs ~0.5 s a hash on a busy 2-core box); the login test
    switches back to the app's own hashers."""
    settings.PASSWORD_HASHERS = FAST_HASHERS
