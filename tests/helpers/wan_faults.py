"""WAN faults a test injects into a cluster started with ``wan_control=True``."""

from __future__ import annotations

import time

from causal_client.wan import CONTROL_REREAD_S
from loadtest.check.nemesis import write_wan_control
from services.launcher.cluster import Cluster


def partition(cluster: Cluster, sites: tuple[str, str], seconds: float) -> float:
    """Every message between ``sites`` held from now for ``seconds``, then let through in order;
    returns when every process has seen it (the control file is looked at every 50 ms), with the
    wall-clock time the partition heals."""
    now = time.time()
    write_wan_control(cluster, {"partitions": [{"sites": list(sites), "from": now, "until": now + seconds}]})
    # A fixed time, not a hope: a process looks at the file as it sends a message across sites,
    # and looks again once CONTROL_REREAD_S has passed since its last look (causal_client/wan.py),
    # so every message sent from here on is held, however busy the machine. (Nothing to wait on:
    # a process reads the file only when it sends, and says nothing of what it read.)
    time.sleep(4 * CONTROL_REREAD_S)
    return now + seconds
