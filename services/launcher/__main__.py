"""Command line: start a topology, report its status, or stop it.

python -m services.launcher up topologies/demo-3region.toml
python -m services.launcher status
python -m services.launcher reconfigure NEW-TREE.toml   (the same regions, another tree, live)
python -m services.launcher down
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path

from redis.exceptions import RedisError

from services import auth
from services.launcher import reconfigure, store_cluster
from services.launcher.cluster import HEALTHY_WITHIN_S, TOPOLOGY_FILE, Cluster, LaunchError, read_state
from services.launcher.redis_binary import RedisNotFound
from services.pids import pid_alive
from services.probes import grpc_serving, link_serving, redis_ping
from services.topology import Topology, TopologyError, load_topology
from services.traits import TRAITS

DEFAULT_RUN_DIR = Path(".run")


def _load(args: argparse.Namespace) -> Topology:
    topology = Topology.load(args.topology)
    overrides = {}
    if args.base_port:
        overrides["base_port"] = args.base_port
    if args.protocol:
        overrides["protocol"] = args.protocol
    if getattr(args, "tls", False):
        overrides["tls"] = True
    if overrides:
        topology = Topology.from_dict({**topology.model_dump(), **overrides}, source=topology.source)
    return topology


def cmd_up(args: argparse.Namespace) -> int:
    topology = _load(args)
    cluster = Cluster(topology, args.run_dir, web=args.web)
    print(f"starting {topology.name!r} ({topology.protocol}) in {cluster.run_dir} ...", flush=True)
    kept = not args.fresh and any(cluster.data_dir.glob("*/appendonlydir"))
    started = time.monotonic()
    try:
        cluster.start(timeout=args.timeout, fresh=args.fresh)  # stops what it started if it fails
    except KeyboardInterrupt:
        print("interrupted while starting; stopped everything")
        return 130
    print(f"all {len(cluster.processes)} processes healthy in {time.monotonic() - started:.1f}s")
    for what, where in cluster.endpoints():
        print(f"  {what:<32} {where}")
    print(f"  logs: {cluster.run_dir / 'logs'}")
    if topology.tls:
        ca = cluster.tls_dir / "ca.pem"
        print(f"  TLS: clients set SATURN_TLS_DIR={cluster.tls_dir}; browsers trust {ca}")
    if kept:
        print(f"  data: kept from an earlier run in {cluster.data_dir} (`up --fresh` starts empty)")
    print("a process that dies is restarted; press Ctrl-C to stop everything", flush=True)
    stopping = asked = False

    def request_stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    def request_reconfiguration(*_: object) -> None:
        nonlocal asked
        asked = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(reconfigure.SIGNAL, request_reconfiguration)
    try:
        while not stopping:  # the supervisor restarts what dies, and says so on stderr
            if asked:
                asked = False
                reconfigure.serve_request(cluster)
            time.sleep(0.1)
    finally:
        print("stopping ...", flush=True)
        cluster.stop()
        print("stopped; no process left behind")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = read_state(args.run_dir)
    if not state:
        print(f"nothing running from {args.run_dir} (no state file)")
        return 1
    print(f"topology {state['topology']} (launcher pid {state['launcher_pid']})")
    bad = 0
    for name, proc in state["processes"].items():
        alive = pid_alive(proc["pid"])
        host = proc.get("host", "127.0.0.1")
        supervision = proc.get("state", "running")
        if supervision != "running":
            health = supervision  # stopped (on purpose), restarting, gave-up
        elif not alive:
            health = "DEAD"
        elif proc["kind"] == "redis":
            health = "healthy" if redis_ping(host, proc["port"], auth.secret()) else "unhealthy"
        elif proc["kind"] in ("grpc", "link"):
            serving = grpc_serving if proc["kind"] == "grpc" else link_serving
            health = "healthy" if serving(f"{host}:{proc['port']}") else "unhealthy"
        else:
            health = "running"
        bad += health not in ("healthy", "running")
        port = proc["port"] or "-"
        restarts = proc.get("restarts", 0)
        print(f"  {name:<28} pid {proc['pid']:<8} port {port!s:<6} restarts {restarts:<3} {health}")
    return 1 if bad else 0


def cmd_down(args: argparse.Namespace) -> int:
    state = read_state(args.run_dir)
    if not state:
        print(f"nothing running from {args.run_dir}")
        return 0
    if pid_alive(state["launcher_pid"]):
        os.kill(state["launcher_pid"], signal.SIGTERM)  # it stops its children itself
    else:
        for proc in state["processes"].values():
            if pid_alive(proc["pid"]):
                os.kill(proc["pid"], signal.SIGTERM)
    print("stop requested")
    return 0


def cmd_move_shard(args: argparse.Namespace) -> int:
    """Moves a shard of a region's cluster store to another master while the region serves."""
    state = read_state(args.run_dir)
    if not state:
        print(f"nothing running from {args.run_dir} (no state file)")
        return 1
    topology = load_topology(str(Path(args.run_dir) / TOPOLOGY_FILE))  # as the processes read it
    if topology.store.engine != "cluster":
        raise TopologyError(f"{topology.source}: standalone stores: shards move between a cluster's masters")
    try:
        topology.shard_tag(args.region, args.shard)  # an unknown region or shard is refused here
    except ValueError as exc:
        raise TopologyError(str(exc)) from None
    if not 0 <= args.to < topology.store_nodes(args.region):
        raise TopologyError(f"region {args.region} has no store node {args.to}")
    try:
        held = store_cluster.move_shard(topology, args.region, args.shard, args.to, auth.secret())
    except (store_cluster.ClusterFormError, RedisError) as exc:
        raise LaunchError(f"moving {args.region} shard {args.shard}: {exc}") from None
    print(f"{args.region} shard {args.shard} is on {args.region}.redis{args.to} (calls waited {held:.2f} s)")
    return 0


def cmd_reconfigure(args: argparse.Namespace) -> int:
    return reconfigure.request(args.run_dir, args.topology, args.timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.launcher", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--run-dir", type=Path, default=DEFAULT_RUN_DIR, help="logs, state, data")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start every process of a topology and wait for Ctrl-C")
    up.add_argument("topology")
    up.add_argument("--base-port", type=int, default=0, help="override the file's base port")
    up.add_argument("--protocol", choices=list(TRAITS))
    up.add_argument(
        "--timeout", type=float, default=HEALTHY_WITHIN_S,
        help=f"seconds to wait for health (default {HEALTHY_WITHIN_S:.0f})",
    )  # fmt: skip
    up.add_argument(
        "--web", action="store_true", help="also the web app: per region gunicorn, a Celery worker and broker"
    )
    up.add_argument("--fresh", action="store_true", help="discard the stores' data from an earlier run")
    up.add_argument(
        "--tls", action="store_true", help="every connection over TLS, with certificates made in RUN_DIR/tls"
    )
    sub.add_parser("status", help="report the processes of the running topology")
    sub.add_parser("down", help="stop the running topology")
    reconf = sub.add_parser(
        "reconfigure", help="move the running topology to another serializer tree, without stopping (§6.2)"
    )
    reconf.add_argument("topology", help="the same regions with a new tree (as services.configure writes)")
    reconf.add_argument("--timeout", type=float, default=60.0, help="seconds for each step")
    move = sub.add_parser(
        "move-shard", help="move a shard of a region's cluster store to another master, without stopping"
    )
    move.add_argument("region")
    move.add_argument("shard", type=int)
    move.add_argument("to", type=int, help="the master's node index (the N of REGION.redisN)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        commands = {
            "up": cmd_up, "status": cmd_status, "down": cmd_down, "reconfigure": cmd_reconfigure,
            "move-shard": cmd_move_shard,
        }  # fmt: skip
        return commands[args.command](args)
    except (TopologyError, LaunchError, RedisNotFound) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
