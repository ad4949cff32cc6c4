"""Chirp served in this process (Django's test client) against a started cluster of the
topology, its first region: what the experiments that time a page share (the store is real;
only the HTTP server is left out, so a figure is the Django side of a page's cost)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import BenchError
from services.topology import Topology

PASSWORD = "correct-horse-7391"


@contextlib.contextmanager
def signed_in_client(topology_file: Path, protocol: str, username: str) -> Iterator:
    """A Django test client signed up and in as ``username`` at the topology's first region, with
    the cluster (and its web tier, whose Celery workers fan out) running for the block."""
    topology = with_overrides(Topology.load(topology_file), protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django
    from django.conf import settings

    django.setup()
    with tempfile.TemporaryDirectory() as run_dir, started(topology, Path(run_dir), web=True) as cluster:
        from django.test import Client

        from webapp import context as region

        settings.SATURN_TOPOLOGY = str(cluster.topology_file)
        settings.SATURN_REGION = topology.region_names[0]
        settings.SECRET_KEY, settings.ALLOWED_HOSTS = cluster.secret_key, ["*"]
        region.reset()
        client = Client()
        fields = {"username": username, "password": PASSWORD, "password_again": PASSWORD}
        if client.post("/signup/", fields).status_code != 302:
            raise BenchError(f"could not sign up {username!r}")
        yield client


def timed_ms(get: Callable[[], object], rounds: int) -> list[float]:
    """Each of ``rounds`` calls' milliseconds, after one to warm up."""
    get()
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        get()
        samples.append((time.perf_counter() - began) * 1000)
    return samples
