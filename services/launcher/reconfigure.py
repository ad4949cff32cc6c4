"""Moves a running cluster to a new serializer tree without stopping it (paper §6.2).

The steps, each waited for: every region's tree record names the new tree (its proxy then takes
the new tree's links); the new tree's serializers start, next to the old ones on their own ports;
every record tells its label sink to send on the new tree, so each sink sends an epoch-change
label through the old tree and its later labels through the new one; every remote proxy takes
the new tree once it has delivered all the old tree brought (services/saturn/proxy.py); then the
old serializers stop, and a process restarted later reads the new tree.

`python -m services.launcher reconfigure NEW.toml` asks the running launcher to do this
(:func:`request`); a test calls :func:`reconfigure` on its cluster.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from services import plan
from services.launcher.cluster import Cluster, LaunchError, read_state
from services.saturn import epochs
from services.topology import Topology, TopologyError

log = logging.getLogger("launcher.reconfigure")

REQUEST_FILE = "reconfigure-request.json"
PROGRESS_FILE = "reconfigure-progress.log"
SIGNAL = signal.SIGUSR1
Report = Callable[[str], None]


def reconfigure(
    cluster: Cluster, offered: Topology, timeout: float = 60.0, report: Report = log.info
) -> Topology:
    """Moves ``cluster`` to ``offered``'s tree (its regions must be the running ones); returns
    the topology it runs now. Raises LaunchError if a step does not finish within ``timeout``."""
    started = time.monotonic()
    old = cluster.topology
    new = start_tree(cluster, offered, timeout, report)
    epochs.publish(new, send=True)
    report("every region's sink is to send on the new tree; waiting for sinks and proxies")
    wait_moved(new, timeout)
    report(f"every proxy delivers the new tree's labels ({time.monotonic() - started:.2f}s); "
           "stopping the old serializers")  # fmt: skip
    finish(cluster, old, new, timeout)
    report(f"done in {time.monotonic() - started:.2f}s: every proxy in the tree's order on epoch {new.epoch}")
    return new


def start_tree(cluster: Cluster, offered: Topology, timeout: float, report: Report = log.info) -> Topology:
    """Starts the serializers of ``offered``'s tree, the next epoch, beside the running ones,
    once every region knows it (its proxy then takes their links at once)."""
    old = cluster.topology
    new = epochs.next_tree(old, offered)
    epochs.publish(new, send=False)
    tree_file = cluster.run_dir / f"topology-e{new.epoch}.json"
    tree_file.write_text(new.model_dump_json(indent=2))
    specs = plan.serializers(new, replace(cluster.layout, topology_file=tree_file))
    report(f"epoch {old.epoch} → {new.epoch}: starting {len(specs)} serializers of the new tree")
    cluster.add(specs, timeout)
    return new


def wait_moved(new: Topology, timeout: float) -> None:
    """Until every region's sink sends on the new tree and its proxy delivers its labels."""
    try:
        epochs.wait_moved(new.epoch, new, timeout)
    except TimeoutError as exc:
        raise LaunchError(str(exc)) from exc


def finish(cluster: Cluster, old: Topology, new: Topology, timeout: float) -> None:
    """The old tree's serializers stop (no proxy needs them now: their links' closing is no gap
    to a proxy on the new tree), and processes restarted from now on read the new tree."""
    cluster.remove([spec.name for spec in plan.serializers(old, cluster.layout)])
    cluster.replace_topology(new)
    cluster.wait_proxies_in_tree_order(timeout)


# -- the command line's request to a running launcher --------------------------------------
def request(run_dir: Path, offered_file: str, timeout: float, out: Report = print) -> int:
    """Hands ``offered_file`` to the launcher running from ``run_dir`` and follows its progress."""
    state = read_state(run_dir)
    if not state:
        out(f"error: nothing running from {run_dir}")
        return 1
    Topology.load(offered_file)  # a clear error here, before the launcher is bothered
    progress = run_dir / PROGRESS_FILE
    progress.unlink(missing_ok=True)
    (run_dir / REQUEST_FILE).write_text(json.dumps({"topology": str(Path(offered_file).resolve()),
                                                    "timeout": timeout}))  # fmt: skip
    os.kill(state["launcher_pid"], SIGNAL)
    shown, deadline = 0, time.monotonic() + timeout + 30
    while time.monotonic() < deadline:
        lines = progress.read_text().splitlines() if progress.exists() else []
        for line in lines[shown:]:
            out(line)
            if line.startswith(("done", "error")):
                return 0 if line.startswith("done") else 1
        shown = len(lines)
        time.sleep(0.1)
    out("error: the launcher did not answer")
    return 1


def serve_request(cluster: Cluster) -> None:
    """In the launcher: carries out a pending request, writing its progress for the asker."""
    path = cluster.run_dir / REQUEST_FILE
    if not path.exists():
        return
    asked = json.loads(path.read_text())
    path.unlink()
    progress = cluster.run_dir / PROGRESS_FILE

    def report(line: str) -> None:
        print(f"reconfigure: {line}", flush=True)
        with progress.open("a") as f:
            f.write(line + "\n")

    try:
        reconfigure(cluster, Topology.load(asked["topology"]), asked["timeout"], report)
    except (TopologyError, LaunchError, OSError) as exc:
        report(f"error: {exc}")
