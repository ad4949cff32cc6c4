"""How long a shard refuses writes when a Redis Cluster store's master dies and stays dead, and
what survives: ``python -m loadtest bench store-failover``.

A region's store is a Redis Cluster of three masters (a master's failure is agreed by a majority
of the masters, so two would never fail over) with two replicas each: once one replica is
promoted, the other lets the new master acknowledge writes (a write is acknowledged once a
replica has it, ``[store] acknowledge = "replica"``). For each ``cluster-node-timeout``, a
client at region ``a`` writes rows of the first master's shard at a steady pace; that master is
killed and held down (nothing restarts it), and the writer keeps trying. Reported: how long
writes were refused (from the kill to the first write acknowledged after it: the failure's
detection, the replicas' election, the client finding the new master), and how many
acknowledged writes were lost (none). ``bench store-restart`` is the standalone store's answer
to the same crash. ``--out`` also writes JSON.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

from causal_client import CausalClient
from loadtest.bench.store_outage_family import (
    CLIENT_TIMEOUT_S,
    GROUP,
    REGION,
    add_around,
    crash_and_write,
    report_outages,
)
from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import Experiment
from loadtest.harness.options import numbers
from loadtest.harness.report import say
from services.topology import Topology

MASTERS, REPLICAS = 3, 2


@dataclass
class Row:
    node_timeout_ms: int
    unavailable_s: float
    failed_writes: int
    acknowledged: int
    lost: int


def cluster_store(topology: Topology, node_timeout_ms: int) -> Topology:
    """The topology with every region's store a cluster of MASTERS masters with REPLICAS each."""
    data = topology.model_dump()
    for region in data["regions"]:
        region["shards"] = MASTERS
    store = {
        "engine": "cluster",
        "masters": MASTERS,
        "replicas": REPLICAS,
        "node_timeout_ms": node_timeout_ms,
    }
    return Topology.from_dict({**data, "store": store}, source=topology.source)


def one_failover(topology: Topology, around_s: float) -> Row:
    """A fresh cluster; region a's first master (shard 0's) killed once and kept down."""
    victim = f"{REGION}.redis0"
    on_first_master = (f"w-{i}" for i in itertools.count() if topology.shard_of(REGION, GROUP, f"w-{i}") == 0)
    rows = list(itertools.islice(on_first_master, 100_000))
    scratch = tempfile.TemporaryDirectory(prefix="store-failover-")
    with scratch, started(topology, Path(scratch.name)) as cluster:
        client = CausalClient.connect(
            topology.client_address(REGION), site=topology.region(REGION).site,
            endpoints=topology.client_endpoints(), timeout=CLIENT_TIMEOUT_S,
        )  # fmt: skip
        try:
            say(f"node timeout {topology.store.node_timeout_ms} ms: killing {victim} for good ...")
            outage = crash_and_write(client, lambda: cluster.kill(victim), rows.__getitem__, around_s)
        finally:
            client.close()
    row = Row(topology.store.node_timeout_ms, outage.unavailable_s, outage.failed_writes, outage.acknowledged,
              outage.lost)  # fmt: skip
    say(f"  writes back after {row.unavailable_s:.2f} s; {row.lost} of {row.acknowledged} acknowledged lost")
    return row


def run(args: argparse.Namespace) -> int:
    base = with_overrides(Topology.load(args.topology), protocol=args.protocol)
    rows = []
    for timeout_ms in args.node_timeout:
        topology = cluster_store(base, timeout_ms)
        rows.append(one_failover(with_overrides(topology, base_port=find_base_port(topology)), args.around))
    title = f"{base.name} ({base.protocol}): a cluster store's master killed for good, "
    title += f"{MASTERS} masters with {REPLICAS} replicas each"
    cells = [[str(r.node_timeout_ms)] for r in rows]
    return report_outages(args.out, "store-failover", title, ["node timeout ms"], cells, rows)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node-timeout", type=numbers(int), default=[500, 1000, 2000],
        help="cluster-node-timeout values in ms, a list (default: 500,1000,2000)")  # fmt: skip
    add_around(parser)


EXPERIMENT = Experiment(
    name="store-failover",
    summary="a cluster store's master killed for good: how long its shard refuses writes, what it lost",
    minutes=(2.0, 2.0),
    run=run,
    arguments=arguments,
    shared={"topology": "topologies/two-region.toml", "protocol": "saturn", "out": ""},
    about=__doc__ or "",
)
