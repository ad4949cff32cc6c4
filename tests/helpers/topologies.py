"""Topologies for tests: the shipped files, on ports no other cluster of this run uses."""

from __future__ import annotations

import os
from pathlib import Path

from loadtest.harness import ports
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "topologies"
# Clusters of the suite take ports in 10000-32767: below Linux's ephemeral ports (32768 on), where
# an outgoing connection (a health check, say) could take a port a cluster needs, and above the
# benches' (loadtest/harness/cluster.py). Each worker has its part (loadtest/harness/ports.py).
TEST_PORTS = (10000, 32768)
SPAN = 600  # ports a cluster may use above its base, relays included, where its topology is not known
_next = [os.getpid()]  # where this process looks next: past the cluster it placed last


def free_base_port(span: int = SPAN) -> int:
    """A base port with ``span`` free ports above it, in this worker's part of the range."""
    return _place([("127.0.0.1", offset) for offset in range(span)])


def _place(offsets: list[tuple[str, int]]) -> int:
    """A base for a cluster with ports at ``offsets``, with room for ``SPAN`` above it (a test may
    add relays to a placed topology: ``with_bandwidth``)."""
    offsets = [*offsets, ("127.0.0.1", SPAN - 1)]
    bases = ports.my_part(*TEST_PORTS)
    base = ports.free_base(offsets, bases, first=_next[0])
    if base is None:
        raise RuntimeError(f"no free ports for a cluster in {bases.start}-{bases.stop - 1}")
    _next[0] = bases.index(base) + 1 + max(offset for _, offset in offsets) // ports.STEP
    return base


def load_topology(name_or_dict: str | dict, **overrides) -> Topology:
    if isinstance(name_or_dict, dict):
        data = dict(name_or_dict)
    else:
        data = Topology.load(TOPOLOGIES / name_or_dict).model_dump()
    data.update(overrides)
    topology = Topology.from_dict(data)
    if "base_port" in overrides:
        return topology
    data["base_port"] = _place(ports.offsets_of(topology))
    return Topology.from_dict(data)


def with_groups(name: str, groups: dict[str, list[str]], protocol: str) -> dict:
    """A shipped topology (as a dict for ``load_topology``/``launch``) with other groups and protocol."""
    data = Topology.load(TOPOLOGIES / name).model_dump()
    data["groups"] = groups
    data["protocol"] = protocol
    return data
