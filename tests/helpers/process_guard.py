"""The ``cluster`` marker, checked: a test that is not marked may not start a process.

Tests marked ``cluster`` (their module says ``pytestmark = pytest.mark.cluster``) start stores,
services, web apps or browsers; ``pytest -m "not cluster"`` runs the others in seconds. So that
the split stays true, every unmarked test runs with process creation refused in the test's own
thread (``subprocess.Popen`` and the launcher's ``Cluster.start``): a test that starts one fails,
naming the marker it needs. Threads of clusters that marked tests left running are untouched.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
from collections.abc import Iterator

import pytest

from services.launcher.cluster import Cluster

MARKERS = ("cluster", "docker")


class StartsProcesses(RuntimeError):
    """An unmarked test started a process."""


def starts_processes(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in MARKERS)


@contextlib.contextmanager
def refusing_processes(nodeid: str) -> Iterator[None]:
    real_popen, real_start = subprocess.Popen.__init__, Cluster.start
    message = f"{nodeid} starts a process: mark its module `pytestmark = pytest.mark.cluster`"

    def popen(self, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            raise StartsProcesses(message)
        real_popen(self, *args, **kwargs)

    def start(self, *args, **kwargs):
        raise StartsProcesses(message)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]
    Cluster.start = start  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real_popen  # type: ignore[method-assign]
        Cluster.start = real_start  # type: ignore[method-assign]
