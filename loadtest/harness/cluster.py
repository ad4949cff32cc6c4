"""The cluster under test: started with the project's launcher on a free block of ports and
always stopped again, or the one already running (``--attach``) identified by its protocol."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from causal_client import CausalClient, direct
from loadtest.harness import ports
from loadtest.harness.experiment import BenchError
from loadtest.harness.report import say
from services import auth
from services.launcher.cluster import Cluster
from services.topology import Topology


def with_overrides(topology: Topology, **overrides: object) -> Topology:
    """The topology with some fields replaced, validated again (an unknown protocol fails here)."""
    return Topology.from_dict({**topology.model_dump(), **overrides}, source=topology.source)


def with_shards(topology: Topology, shards: int) -> Topology:
    """The topology with ``shards`` shards in every region."""
    data = topology.model_dump()
    for region in data["regions"]:
        region["shards"] = shards
    return Topology.from_dict(data, source=topology.source)


def with_bandwidth(topology: Topology, mbit: float, priority: bool = False) -> Topology:
    """The topology with every link between two of its sites at ``mbit`` Mbit/s each way (through
    relays: services/wan/), critical metadata first where ``priority``."""
    sites = topology.sites
    table = {a: {b: mbit for b in sites[i + 1 :]} for i, a in enumerate(sites[:-1])}
    return with_overrides(topology, bandwidth_mbit=table, priority=priority)


# Ports for started clusters: below Linux's ephemeral range (32768-60999, where an outgoing
# connection may take any port a cluster wants), away from the shipped topologies' own ports
# (7000-7999: someone may run one by hand) and from the test suite's (10000-32767).
PORT_RANGES = ((2000, 7000), (8000, 10000))


def find_base_port(topology: Topology) -> int:
    """A base port where every port of the topology is free, in this process's part of the
    ranges (loadtest/harness/ports.py), starting at a per-process offset so that two benchmarks
    started together do not pick the same."""
    offsets = ports.offsets_of(topology)
    for low, high in PORT_RANGES:
        bases = ports.my_part(low, high)
        if bases and (base := ports.free_base(offsets, bases, first=os.getpid())) is not None:
            return base
    raise BenchError(
        f"no free block of ports in 2000-6999 or 8000-9999 (${ports.SLICE_ENV}: this process's part); "
        "pass --base-port"
    )


DESCRIBE_TIMEOUT_S = 10.0


def running_protocol(topology: Topology, region: str) -> str:
    """The protocol of the cluster already running at the topology's ports (for --attach)."""
    return direct.describe(topology.client_address(region), auth.secret(), DESCRIBE_TIMEOUT_S)["protocol"]


@contextlib.contextmanager
def started(topology: Topology, run_dir: Path, web: bool = False) -> Iterator[Cluster]:
    """Runs the topology with the project's launcher (``web``: with the web tier) for the duration
    of the block; stops every process on the way out, whatever happens (Ctrl-C and failures)."""
    cluster = Cluster(topology, run_dir, web=web)
    say(
        f"[{topology.protocol}] starting {topology.name} with ports from {topology.base_port} "
        f"(logs in {cluster.run_dir / 'logs'}) ..."
    )
    began = time.monotonic()
    cluster.start()  # stops what it started if it fails
    try:
        elapsed = time.monotonic() - began
        say(f"[{topology.protocol}] {len(cluster.processes)} processes healthy in {elapsed:.1f} s")
        yield cluster
    finally:
        say(f"[{topology.protocol}] stopping the cluster ...")
        cluster.stop()


def client_at_site(topology: Topology, region: str) -> CausalClient:
    """A client of ``region`` running at its site."""
    address, site = topology.client_address(region), topology.region(region).site
    return CausalClient.connect(address, site=site, endpoints=topology.client_endpoints())


@contextlib.contextmanager
def clients_at_sites(topology: Topology) -> Iterator[dict[str, CausalClient]]:
    """One client per region, running at that region's site (calls to other regions pay the
    emulated WAN, and links with a bandwidth carry them), closed on the way out."""
    clients = {r: client_at_site(topology, r) for r in topology.region_names}
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()


def one_serializer_topology() -> Topology:
    """a — s — b on one site (the serializer and proxy benches' tree), on a free block of ports
    below the ephemeral range (the bench's cluster picker: a port chosen from an ephemeral one
    could be any outgoing connection's)."""
    topology = Topology.from_dict({
        "name": "serializer-bench", "protocol": "saturn", "base_port": PORT_RANGES[0][0],
        "regions": [{"name": "a", "site": "X"}, {"name": "b", "site": "X"}],
        "groups": {"all": ["*"]},
        "serializers": [{"name": "s", "site": "X"}],
        "tree": [{"a": "a", "b": "s"}, {"a": "b", "b": "s"}],
    })  # fmt: skip
    return with_overrides(topology, base_port=find_base_port(topology))
