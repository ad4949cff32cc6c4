"""The topology file: the single source of truth for regions, sites, latencies, groups, tree.

Everything (launcher, services, tests, benchmark, compose) reads the same TOML file through
``Topology.load``. A malformed file raises :class:`TopologyError` naming the field and the fault.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError, field_validator, model_validator

from services.topology_addresses import host_variable
from services.topology_fields import (
    ALL_REGIONS,
    CLUSTER_BUS_PORTS,
    SERIALIZER_EPOCH_STRIDE,
    TopologyError,
)
from services.topology_parts import (
    MAX_STORE_NODES,
    NAME_PATTERN,
    Region,
    RegionPorts,
    Serializer,
    TreeEdge,
    no_duplicates,
)
from services.topology_tree import TopologyTree
from services.traits import traits_of
from services.wan.routes import RELAY_PORT_OFFSET

__all__ = [
    "ALL_REGIONS", "NAME_PATTERN", "Region", "RegionPorts", "Serializer", "Topology", "TopologyError",
    "TreeEdge", "host_variable", "load_topology",
]  # fmt: skip


class Topology(TopologyTree):
    """A validated topology. Build it with :meth:`load` or :meth:`from_dict`. Its fields and
    lookups (topology_fields.py), where each node is reached (topology_addresses.py) and the
    tree and the WAN between sites (topology_tree.py) are classes of their own below it; this
    one validates the whole and says what a client learns (``describe``)."""

    def data_shape(self) -> dict:
        """What the stores' data depends on (a store keeps it only for the same shape): the
        protocol, each region's shards, and the groups. Ports, latencies and the tree may change."""
        return {
            "protocol": self.protocol,
            "shards": {r.name: r.shards for r in self.regions},
            "store": self.store.model_dump(exclude={"node_timeout_ms"}),
            "groups": {g: sorted(members) for g, members in self.group_members.items()},
        }

    # -- validation --------------------------------------------------------------------------
    @field_validator("protocol")
    @classmethod
    def _known_protocol(cls, protocol: str) -> str:
        traits_of(protocol)  # ValueError naming the known ones
        return protocol

    @field_validator("groups")
    @classmethod
    def _group_names(cls, groups: dict[str, list[str]]) -> dict[str, list[str]]:
        for name, members in groups.items():
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"group name {name!r} must match {NAME_PATTERN}")
            if not members:
                raise ValueError(f"group {name!r} lists no regions")
        return groups

    @model_validator(mode="after")
    def _consistent(self) -> Topology:
        names = [r.name for r in self.regions]
        no_duplicates("regions", names)
        no_duplicates("serializers", [s.name for s in self.serializers])
        clash = set(names) & {s.name for s in self.serializers}
        if clash:
            raise ValueError(f"names used by both a region and a serializer: {sorted(clash)}")
        for group, members in self.groups.items():
            for member in members:
                if member != ALL_REGIONS and member not in names:
                    raise ValueError(f"groups.{group}: unknown region {member!r}")
        self._check_latencies()
        self._check_bandwidths()
        self._check_tree()
        self._check_store()
        self._check_ports()
        return self

    def _check_latencies(self) -> None:
        sites = self.sites
        for a, row in self.latency_ms.items():
            if a not in sites:
                raise ValueError(f"latency_ms.{a}: no region or serializer is at site {a!r}")
            for b, value in row.items():
                if b not in sites:
                    raise ValueError(f"latency_ms.{a}.{b}: no region or serializer at site {b!r}")
                if value < 0:
                    raise ValueError(f"latency_ms.{a}.{b}: latency must be >= 0, got {value}")
        if not self.latency_ms:
            return  # no emulation: a real deployment
        for a in sites:
            for b in sites:
                if a != b and self._raw_latency(a, b) is None:
                    raise ValueError(f"latency_ms: no latency given between sites {a!r} and {b!r}")

    def _check_bandwidths(self) -> None:
        sites = self.sites
        for a, row in self.bandwidth_mbit.items():
            for b, value in row.items():
                if a not in sites or b not in sites or a == b:
                    raise ValueError(f"bandwidth_mbit.{a}.{b}: not a pair of two sites of this topology")
                if value <= 0:
                    raise ValueError(f"bandwidth_mbit.{a}.{b}: bandwidth must be > 0 Mbit/s, got {value}")

    def _check_tree(self) -> None:
        if not self.tree and not self.serializers:
            if self.traits.tree:
                raise ValueError(f"protocol {self.protocol!r} needs serializers and a tree")
            return
        nodes = {r.name for r in self.regions} | {s.name for s in self.serializers}
        adjacency: dict[str, set[str]] = defaultdict(set)
        for i, edge in enumerate(self.tree):
            for end in (edge.a, edge.b):
                if end not in nodes:
                    raise ValueError(f"tree[{i}]: unknown node {end!r}")
            if edge.a == edge.b or edge.b in adjacency[edge.a]:
                raise ValueError(f"tree[{i}]: repeated or self edge {edge.a}-{edge.b}")
            adjacency[edge.a].add(edge.b)
            adjacency[edge.b].add(edge.a)
        if len(self.tree) != len(nodes) - 1:
            raise ValueError(
                f"tree: {len(nodes)} nodes need exactly {len(nodes) - 1} edges to form a tree, "
                f"got {len(self.tree)}"
            )
        seen, stack = set(), [next(iter(sorted(nodes)))]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(adjacency[node] - seen)
        if seen != nodes:
            raise ValueError(f"tree: not connected; unreachable: {sorted(nodes - seen)}")
        for region in self.regions:
            if len(adjacency[region.name]) != 1:
                raise ValueError(f"tree: region {region.name!r} must be a leaf (exactly one edge)")

    def _check_store(self) -> None:
        if self.store.engine != "cluster":
            return
        if len(self.regions) * CLUSTER_BUS_PORTS > RELAY_PORT_OFFSET:
            most = RELAY_PORT_OFFSET // CLUSTER_BUS_PORTS
            raise ValueError(f"store: a Redis Cluster per region has bus ports for {most} regions at most")
        for r in self.regions:
            if r.shards < self.store.masters:
                raise ValueError(
                    f"regions.{r.name}: {r.shards} shard(s) cannot spread over store.masters = "
                    f"{self.store.masters} (a master with no shard would hold nothing)"
                )
        nodes = self.store.nodes_per_region or 0
        if nodes > MAX_STORE_NODES:
            raise ValueError(
                f"store: {self.store.masters} masters with {self.store.replicas} replicas each are {nodes} "
                f"Redis processes per region, more than the {MAX_STORE_NODES} a region has ports for"
            )

    def _check_ports(self) -> None:
        most = max((sz.replicas for sz in self.serializers), default=1)
        if len(self.serializers) * most > SERIALIZER_EPOCH_STRIDE:
            raise ValueError(
                f"{len(self.serializers)} serializers with up to {most} replicas need more than the "
                f"{SERIALIZER_EPOCH_STRIDE} ports a tree has"
            )
        used: dict[tuple[str, int], str] = {}
        for owner, host, port in self.all_addresses():
            if (host, port) in used:
                where = f"port {port}" if host == self.host else f"{host}:{port}"
                raise ValueError(f"{where} used by both {used[host, port]} and {owner}")
            used[host, port] = owner

    # -- loading -----------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> Topology:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError as exc:
            raise TopologyError(f"{path}: no such topology file") from exc
        except OSError as exc:  # a directory, no permission, ...
            raise TopologyError(f"{path}: cannot read topology file: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise TopologyError(f"{path}: not valid TOML: not UTF-8 text ({exc.reason})") from exc
        except tomllib.TOMLDecodeError as exc:
            raise TopologyError(f"{path}: not valid TOML: {exc}") from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = "<memory>") -> Topology:
        try:
            return cls.model_validate({**data, "source": source})
        except ValidationError as exc:
            raise TopologyError(_explain(source, exc)) from None

    # -- queries -----------------------------------------------------------------------------

    # -- ports -------------------------------------------------------------------------------

    def with_env_hosts(self, environ: Mapping[str, str]) -> Topology:
        """The same topology with the node hosts that ``SATURN_HOST_<NODE>`` variables name (a
        per-host compose project takes its peers' addresses from its ``.env`` this way)."""
        hosts = {node: environ[var] for node in self.node_names if (var := host_variable(node)) in environ}
        if not hosts:
            return self
        data = self.model_dump()
        for key in ("regions", "serializers"):
            for entry in data[key]:
                entry["host"] = hosts.get(entry["name"], entry["host"])
        return Topology.from_dict(data, source=self.source)

    def describe(self) -> dict:
        """What a client learns from any one region (``CausalClient.connect``): regions, their
        sites, stores and gateway, groups, latencies between sites, limits."""
        return {
            "name": self.name,
            "protocol": self.protocol,
            "traits": self.traits.as_dict(),
            "max_value_bytes": self.max_value_bytes,
            "regions": [
                {"name": r.name, "site": r.site, "stores": self.store_endpoints(r.name),
                 "shards": [self.shard_node(r.name, k) for k in range(r.shards)],
                 "gateway": self.frontend_endpoint(r.name)}
                for r in self.regions
            ],
            "groups": {g: list(members) for g, members in self.group_members.items()},
            "latencies": [
                [a, b, self.latency_ms_between(a, b)] for a in self.sites for b in self.sites if a != b
            ],
            "relays": [[r.from_site, r.endpoint, r.cls, r.via] for r in self.relay_routes],
            "strong": self.strong.model_dump(),
            "store": {"engine": self.store.engine, "acks": self.store.acks},
        }  # fmt: skip

    # -- the serializer tree (paper §5.3) ----------------------------------------------------


def _explain(source: str, exc: ValidationError) -> str:
    """Turns pydantic's report into 'file: field.path: what is wrong' lines."""
    lines = []
    for err in exc.errors():
        loc = ".".join(f"[{part}]" if isinstance(part, int) else str(part) for part in err["loc"]).replace(
            ".[", "["
        )
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        lines.append(f"{loc}: {message}" if loc else message)
    return f"{source}: " + "; ".join(lines)


def load_topology(path: str) -> Topology:
    """A topology file (.toml, or the launcher's .json), with the node hosts the environment
    names (``SATURN_HOST_<NODE>``, see ``Topology.with_env_hosts``)."""
    if path.endswith(".json"):
        topology = Topology.from_dict(json.loads(Path(path).read_text()), source=path)
    else:
        topology = Topology.load(path)
    return topology.with_env_hosts(os.environ)
