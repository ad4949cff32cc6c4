"""One process of the plan, in a container: ``python -m services.node run|health|pause|form-store [NAME]``.

A compose service names the process it is (``$SATURN_PROCESS``, e.g. ``virginia.frontend0``);
``run`` finds it in the same plan the launcher uses (``services/plan.py``), writes what it needs
on disk and becomes it (exec, so Docker's signals reach it); ``health`` is the image's
HEALTHCHECK (the launcher's check for that process); ``pause`` holds a region's network and
process namespaces for its other containers (the region's "pod"), reaping orphans; ``form-store
REGION`` makes a cluster region's store nodes one Redis Cluster, as the launcher does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from pathlib import Path

from redis.exceptions import RedisError

from causal_client.tls import TLS_DIR_ENV
from services import auth, plan
from services.launcher import store_cluster
from services.region.calls_module import MODULE_ENV
from services.topology import Topology, TopologyError, load_topology

PROCESS_ENV = "SATURN_PROCESS"
TOPOLOGY_FILE = Path(os.environ.get("SATURN_TOPOLOGY_FILE", "/etc/saturn/topology.json"))
DATA_DIR = Path(os.environ.get("SATURN_DATA_DIR", "/data"))
FORM_TIMEOUT_S = 120.0  # a region's nodes meeting and syncing, on a loaded Docker host
METRICS_DIR = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR", "/metrics"))


def container_layout() -> plan.Layout:
    """The image's paths (compose/Dockerfile): its Python, the mounted topology, the volume."""
    return plan.Layout(
        python=sys.executable, topology_file=TOPOLOGY_FILE, data_dir=DATA_DIR,
        redis_server=shutil.which("redis-server") or "redis-server",
        redis_module=os.environ.get(MODULE_ENV, "/opt/saturn/saturn_calls.so"),
        tls_dir=Path(tls_dir) if (tls_dir := os.environ.get(TLS_DIR_ENV)) else None,
    )  # fmt: skip


def find(topology: Topology, name: str) -> plan.ProcessSpec:
    specs = {spec.name: spec for spec in plan.processes(topology, container_layout(), web=True)}
    if name not in specs:
        raise SystemExit(f"no process {name!r} in {topology.source} (have: {', '.join(specs)})")
    return specs[name]


def run(topology: Topology, name: str) -> None:
    spec = find(topology, name)
    if spec.owner:
        try:
            auth.require_for(topology.bind_host(spec.owner), name)
        except auth.CredentialsRequired as exc:
            raise SystemExit(str(exc)) from None
    plan.prepare(spec)
    env = {**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"}
    if "DJANGO_ALLOWED_HOSTS" in os.environ:  # the deployment knows where browsers reach it
        env["DJANGO_ALLOWED_HOSTS"] = os.environ["DJANGO_ALLOWED_HOSTS"]
    if spec.region:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(METRICS_DIR)
    os.execvpe(spec.argv[0], spec.argv, env)


def health(topology: Topology, name: str) -> int:
    spec = find(topology, name)
    healthy = plan.is_healthy(topology, spec)
    if healthy and spec.region and spec.name.endswith(".bulk-receiver") and topology.traits.tree:
        healthy = plan.proxy_in_tree_order(topology, spec.region)
        if not healthy:
            print(f"{name}: the remote proxy has not caught up with every peer (unreachable?)")
    print(f"{name}: {'healthy' if healthy else 'unhealthy'}")
    return 0 if healthy else 1


def pause() -> None:
    """Starts a region: its metrics files of an earlier life go (their processes are gone);
    then it waits for SIGTERM, reaping whatever is reparented to it."""
    if METRICS_DIR.is_dir():
        for path in METRICS_DIR.iterdir():
            path.unlink(missing_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the pause below to reap
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            signal.pause()


def form_store(topology: Topology, region: str) -> int:
    """Forms ``region``'s store into a Redis Cluster (``[store] engine = "cluster"``), or finds
    it formed: compose's one-shot ``<region>-store-cluster`` service, run once the region's
    store nodes are healthy and before anything that uses them starts."""
    if region not in topology.region_names:
        have = ", ".join(topology.region_names)
        raise SystemExit(f"no region {region!r} in {topology.source} (have: {have})")
    if topology.store.engine != "cluster":
        print(f"{region}: standalone stores, no cluster to form")
        return 0
    try:
        store_cluster.form(topology, region, auth.secret(), FORM_TIMEOUT_S)
    except (store_cluster.ClusterFormError, RedisError) as exc:
        print(f"{region}'s store cluster: {exc}", file=sys.stderr)
        return 1
    print(f"{region}'s store cluster: every slot served, every replica in sync")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.node", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["run", "health", "pause", "form-store"])
    parser.add_argument(
        "name", nargs="?", default=os.environ.get(PROCESS_ENV), help=f"default ${PROCESS_ENV}"
    )
    args = parser.parse_args(argv)
    if args.action == "pause":
        pause()
    if not args.name:
        parser.error(f"which process? name it or set ${PROCESS_ENV}")
    try:
        topology = load_topology(str(TOPOLOGY_FILE))
    except (OSError, TopologyError) as exc:
        raise SystemExit(f"cannot load the topology {TOPOLOGY_FILE}: {exc}") from None
    if args.action == "health":
        return health(topology, args.name)
    if args.action == "form-store":
        return form_store(topology, args.name)
    run(topology, args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
