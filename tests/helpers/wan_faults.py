"""WAN faults a test injects into a cluster started with ``wan_control=True``."""

from __future__ import annotations

import time

from loadtest.check.nemesis import write_wan_control
from services.launcher.cluster import Cluster


def partition(cluster: Cluster, sites: tuple[str, str], seconds: float) -> float:
    """Every message between ``sites`` held from now for ``seconds``, then let through in order;
    returns when every process has seen it (the control file is looked at every 50 ms), with the
    wall-clock time the partition heals."""
    now = time.time()
    write_wan_control(cluster, {"partitions": [{"sites": list(sites), "from": now, "until": now + seconds}]})
    time.sleep(0.2)
    return now + seconds
