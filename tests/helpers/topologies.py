"""Topologies for tests: the shipped files, on ports no other cluster of this run uses."""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

from services.topology import Topology

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "topologies"
_port_blocks = itertools.count(0)


def _block_free(base: int, span: int = 200) -> bool:
    for port in range(base, base + span):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def free_base_port() -> int:
    """A base port whose block of 200 ports is unused (one block per cluster in this run).

    Blocks stay below 32768, where Linux's ephemeral ports for outgoing connections start: an
    outgoing connection (a health check, say) could otherwise take a port a cluster needs."""
    start = 10000 + (os.getpid() % 20) * 1000
    while True:
        base = start + next(_port_blocks) * 200
        if base + 200 > 32768:
            base = 10000 + (base % 22000)
        if _block_free(base):
            return base


def load_topology(name_or_dict: str | dict, **overrides) -> Topology:
    if isinstance(name_or_dict, dict):
        data = dict(name_or_dict)
    else:
        data = Topology.load(TOPOLOGIES / name_or_dict).model_dump()
    data.update(overrides)
    if "base_port" not in overrides:
        data["base_port"] = free_base_port()
    return Topology.from_dict(data)


def with_groups(name: str, groups: dict[str, list[str]], protocol: str) -> dict:
    """A shipped topology (as a dict for ``load_topology``/``launch``) with other groups and protocol."""
    data = Topology.load(TOPOLOGIES / name).model_dump()
    data["groups"] = groups
    data["protocol"] = protocol
    return data
