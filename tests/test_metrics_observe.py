"""``services.metrics.observe_many``: what a remote proxy uses to record a run's visibilities with
one write per bucket: the exposition must be exactly what observing them one by one gives."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent(
    """
    import os, sys, tempfile
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp()
    from prometheus_client import CollectorRegistry, Histogram, generate_latest, multiprocess
    from services.metrics import observe_many
    values = [0.0, 0.05, 0.1, 0.2, 0.7, 3.0, 0.5, 0.1000001, 1e9]
    many = Histogram("many_seconds", "", ["r"], buckets=[0.1, 0.5, 1.0])
    single = Histogram("single_seconds", "", ["r"], buckets=[0.1, 0.5, 1.0])
    observe_many(many.labels("x"), values)
    for value in values:
        single.labels("x").observe(value)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    lines = generate_latest(registry).decode().splitlines()
    pick = lambda name: sorted(l.removeprefix(name) for l in lines if l.startswith(name))
    print(pick("many_seconds") == pick("single_seconds") and len(pick("many_seconds")) == 6)
    """
)


@pytest.mark.cluster  # a Python of its own: multiprocess mode is chosen when the library is imported
def test_many_observations_at_once_expose_as_one_by_one():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True", done.stdout + done.stderr
