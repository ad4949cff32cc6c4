"""The topology file: the single source of truth for regions, sites, latencies, groups, tree.

Everything (launcher, services, tests, benchmark, compose) reads the same TOML file through
``Topology.load``. A malformed file raises :class:`TopologyError` naming the field and the fault.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from causal_client.tls import http_scheme, redis_scheme
from causal_client.wire import shard_of, shard_tag
from services.auth import redis_credentials
from services.topology_parts import (
    HOST_PATTERN,
    MAX_STORE_NODES,
    NAME_PATTERN,
    Region,
    RegionPorts,
    Serializer,
    StoreSettings,
    StrictModel,
    TreeEdge,
    no_duplicates,
)
from services.traits import Traits, traits_of
from services.tuning import SaturnTuning, StabilizationTuning, StrongSettings
from services.wan import Link, Relays
from services.wan.routes import RELAY_PORT_OFFSET, Route, relay_routes

__all__ = ["NAME_PATTERN", "Region", "RegionPorts", "Serializer", "Topology", "TopologyError", "TreeEdge"]

ALL_REGIONS = "*"
# Serializers of odd epochs listen this far above even epochs' (both trees run during a switch).
SERIALIZER_EPOCH_STRIDE = 32
# A cluster region's nodes' bus ports: a block per region above the serializers' (below the relays').
CLUSTER_BUS_PORTS = MAX_STORE_NODES


class TopologyError(ValueError):
    """The topology file is missing, unreadable or inconsistent; the message says where."""


class Topology(StrictModel):
    """A validated topology. Build it with :meth:`load` or :meth:`from_dict`."""

    name: str
    protocol: str = "eventual"  # a row of services/traits.py
    host: str = Field(default="127.0.0.1", pattern=HOST_PATTERN)  # every node's, unless it names its own
    # where services listen (default: their node's host; 0.0.0.0 in a container)
    bind: str | None = Field(default=None, pattern=HOST_PATTERN)
    base_port: int = Field(default=7100, ge=1024, le=60000)
    max_value_bytes: int = Field(default=1 << 20, ge=1, le=64 << 20)
    # Every connection under TLS with the deployment's own certificates (causal_client/tls.py;
    # made by the launcher and the compose generator, services/certs.py).
    tls: bool = False
    # Services may listen beyond loopback without TLS: said in so many words, logged at every start.
    insecure: bool = False
    # Redis's AOF fsync policy for every store and broker: "always" loses no acknowledged write
    # when a store is killed; "everysec" (Redis's advice for speed) up to a second of them.
    appendfsync: Literal["always", "everysec", "no"] = "always"
    jitter_ms: float = Field(default=0.0, ge=0)
    latency_ms: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Capacity of a site pair's link, each way (Mbit/s; none: unlimited). All traffic between the
    # two sites shares it, through that pair's relay (services/wan/); ``priority``: critical
    # metadata (labels, heartbeats, migrations, claims, acknowledgements) goes ahead of bulk data.
    bandwidth_mbit: dict[str, dict[str, float]] = Field(default_factory=dict)
    priority: bool = False
    regions: list[Region] = Field(min_length=1)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    serializers: list[Serializer] = Field(default_factory=list, max_length=SERIALIZER_EPOCH_STRIDE)
    tree: list[TreeEdge] = Field(default_factory=list)
    # Which tree this is: `services.launcher reconfigure` moves a running system to the next one
    # (paper §6.2); both run side by side meanwhile, so odd epochs' serializers take other ports.
    epoch: int = Field(default=0, ge=0)
    # Saturn's timings that must agree with each other (services/tuning.py): the `[saturn]` table.
    saturn: SaturnTuning = Field(default_factory=SaturnTuning)
    stabilization: StabilizationTuning = Field(default_factory=StabilizationTuning)
    strong: StrongSettings = Field(default_factory=StrongSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    source: str = Field(default="<memory>", exclude=True)

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

    @property
    def traits(self) -> Traits:
        """What its protocol is (services/traits.py): everything else reads these, not its name."""
        return traits_of(self.protocol)

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

    def bandwidth_mbit_between(self, site_a: str, site_b: str) -> float | None:
        """The link's capacity each way between two sites (Mbit/s), None where unlimited."""
        return _between(self.bandwidth_mbit, site_a, site_b)

    @cached_property
    def relay_routes(self) -> list[Route]:
        """Every relay port and what it carries (services/wan/routes.py)."""
        return relay_routes(self)

    @cached_property
    def relays(self) -> Relays:
        """Where a connection from a site to an endpoint goes (through its link's relay or not)."""
        return Relays([(r.from_site, r.endpoint, r.cls, r.via) for r in self.relay_routes])

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
    @cached_property
    def sites(self) -> list[str]:
        seen = dict.fromkeys([r.site for r in self.regions] + [s.site for s in self.serializers])
        return list(seen)

    @cached_property
    def region_names(self) -> list[str]:
        return [r.name for r in self.regions]

    @cached_property
    def group_members(self) -> dict[str, tuple[str, ...]]:
        """Each group's regions, in topology order; ``all`` exists unless the file defines it."""
        groups = dict(self.groups) or {"all": [ALL_REGIONS]}
        resolved = {}
        for name, members in groups.items():
            wanted = set(self.region_names) if ALL_REGIONS in members else set(members)
            resolved[name] = tuple(r for r in self.region_names if r in wanted)
        return resolved

    def region(self, name: str) -> Region:
        for region in self.regions:
            if region.name == name:
                return region
        raise TopologyError(f"{self.source}: unknown region {name!r} (have {self.region_names})")

    def groups_at(self, region: str) -> frozenset[str]:
        return frozenset(g for g, members in self.group_members.items() if region in members)

    def _raw_latency(self, a: str, b: str) -> float | None:
        return _between(self.latency_ms, a, b)

    def latency_ms_between(self, site_a: str, site_b: str) -> float:
        """One-way emulated latency between two sites (0 for the same site or no emulation)."""
        if site_a == site_b:
            return 0.0
        value = self._raw_latency(site_a, site_b)
        return float(value) if value is not None else 0.0

    def region_latency_ms(self, a: str, b: str) -> float:
        return self.latency_ms_between(self.region(a).site, self.region(b).site)

    def store_nodes(self, region: str) -> int:
        """How many Redis processes hold the region's shards: one per shard (standalone), or a
        cluster's masters and replicas."""
        return self.store.nodes_per_region or self.region(region).shards

    def shard_node(self, region: str, shard: int) -> int:
        """Which of the region's Redis processes holds a shard: standalone, the shard's own; in a
        cluster, the master it was placed on when the cluster was made (shard k on master k mod
        masters; a failover or a move changes that, and the cluster says where it went)."""
        return shard % self.store.masters if self.store.engine == "cluster" else shard

    def cluster_bus_port(self, region: str, node: int) -> int:
        """A cluster node's bus port (nodes talk to each other there)."""
        first = self.base_port + 20 * len(self.regions) + 2 * SERIALIZER_EPOCH_STRIDE
        return first + CLUSTER_BUS_PORTS * self._index(region) + node

    def gear_ids(self, region: str) -> list[str]:
        return [f"{region}/{shard}" for shard in range(self.region(region).shards)]

    def shard_of(self, region: str, group: str, row: str) -> int:
        return shard_of(group, row, self.region(region).shards)

    def shard_tag(self, region: str, shard: int) -> str:
        """The hash tag of every key of one of the region's shards (wire.shard_tag)."""
        if not 0 <= shard < self.region(region).shards:
            raise ValueError(f"region {region} has no shard {shard}")
        return shard_tag(shard)

    # -- ports -------------------------------------------------------------------------------
    def _index(self, region: str) -> int:
        return self.region_names.index(region)

    def frontend_port(self, region: str) -> int:
        r = self.region(region)
        return r.ports.frontend or self.base_port + 20 * self._index(region)

    def bulk_port(self, region: str) -> int:
        r = self.region(region)
        return r.ports.bulk or self.base_port + 20 * self._index(region) + 1

    def metrics_port(self, region: str) -> int:
        r = self.region(region)
        return r.ports.metrics or self.base_port + 20 * self._index(region) + 2

    def redis_port(self, region: str, shard: int = 0) -> int:
        r = self.region(region)
        return (r.ports.redis or self.base_port + 20 * self._index(region) + 10) + shard

    def web_port(self, region: str) -> int:
        r = self.region(region)
        return r.ports.web or self.base_port + 20 * self._index(region) + 3

    def broker_port(self, region: str) -> int:
        r = self.region(region)
        return r.ports.broker or self.base_port + 20 * self._index(region) + 4

    def node_host(self, node: str) -> str:
        """Where a region's or serializer's services are reached (by peers and clients)."""
        for r in self.regions:
            if r.name == node:
                return r.host or self.host
        for sz in self.serializers:
            if sz.name == node:
                return sz.host or self.host
        raise TopologyError(f"{self.source}: unknown region or serializer {node!r}")

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

    @cached_property
    def node_names(self) -> list[str]:
        """Regions and serializers: everything that runs somewhere."""
        return [*self.region_names, *(s.name for s in self.serializers)]

    def bind_host(self, node: str) -> str:
        """Where a node's services listen: ``bind`` (0.0.0.0 in a container), else its host."""
        return self.bind or self.node_host(node)

    def web_url(self, region: str) -> str:
        return f"{http_scheme()}://{self.node_host(region)}:{self.web_port(region)}"

    def broker_url(self, region: str) -> str:
        return (
            f"{redis_scheme()}://{redis_credentials()}{self.node_host(region)}:{self.broker_port(region)}/0"
        )

    def metrics_url(self, region: str) -> str:
        return f"{http_scheme()}://{self.node_host(region)}:{self.metrics_port(region)}/metrics"

    def relay_base_port(self) -> int:
        """Relays' ports (services/wan/routes.py) start above both epochs' serializer blocks."""
        return self.base_port + 20 * len(self.regions) + 2 * SERIALIZER_EPOCH_STRIDE + RELAY_PORT_OFFSET

    def serializer_port(self, name: str, replica: int = 0) -> int:
        for i, s in enumerate(self.serializers):
            if s.name == name:
                first = self.base_port + 20 * len(self.regions) + SERIALIZER_EPOCH_STRIDE * (self.epoch % 2)
                return (s.port or first + i) + replica * len(self.serializers)
        raise TopologyError(f"{self.source}: unknown serializer {name!r}")

    def replicas(self, node: str) -> int:
        """How many replicas a tree node runs (a region: 1)."""
        return next((s.replicas for s in self.serializers if s.name == node), 1)

    def frontend_endpoint(self, region: str) -> str:
        return f"{self.node_host(region)}:{self.frontend_port(region)}"

    def frontend_endpoints(self) -> dict[str, str]:
        """Every region's frontend (the gRPC gateway) as this topology names it."""
        return {r: self.frontend_endpoint(r) for r in self.region_names}

    def store_endpoints(self, region: str) -> list[str]:
        """A region's stores, one per shard, as clients reach them (``host:port``)."""
        host = self.node_host(region)
        return [f"{host}:{self.redis_port(region, k)}" for k in range(self.store_nodes(region))]

    def client_address(self, region: str) -> str:
        """Where a client connects to learn the topology (``CausalClient.connect``): the
        region's first store."""
        return self.store_endpoints(region)[0]

    def client_endpoints(self) -> dict[str, list[str]]:
        """Every region's stores as this topology names them (``CausalClient.connect(endpoints=)``)."""
        return {r: self.store_endpoints(r) for r in self.region_names}

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

    def bulk_endpoint(self, region: str) -> str:
        return f"{self.node_host(region)}:{self.bulk_port(region)}"

    def store_urls(self, region: str) -> list[str]:
        """Every Redis process of the region's store, as the services reach them."""
        host = self.node_host(region)
        return [
            f"{redis_scheme()}://{redis_credentials()}{host}:{self.redis_port(region, k)}/0"
            for k in range(self.store_nodes(region))
        ]

    def redis_url(self, region: str, shard: int = 0) -> str:
        """Where the services reach one of the region's shards (its node: ``shard_node``)."""
        port = self.redis_port(region, self.shard_node(region, shard))
        return f"{redis_scheme()}://{redis_credentials()}{self.node_host(region)}:{port}/0"

    # -- the serializer tree (paper §5.3) ----------------------------------------------------
    @cached_property
    def tree_neighbours(self) -> dict[str, tuple[str, ...]]:
        adjacency: dict[str, list[str]] = defaultdict(list)
        for edge in self.tree:
            adjacency[edge.a].append(edge.b)
            adjacency[edge.b].append(edge.a)
        return {node: tuple(sorted(n)) for node, n in adjacency.items()}

    def node_site(self, node: str) -> str:
        for r in self.regions:
            if r.name == node:
                return r.site
        for s in self.serializers:
            if s.name == node:
                return s.site
        raise TopologyError(f"{self.source}: unknown tree node {node!r}")

    def edge_delay_ms(self, a: str, b: str) -> float:
        """The artificial delay of the tree edge a-b (the same both ways)."""
        for edge in self.tree:
            if {edge.a, edge.b} == {a, b}:
                return edge.delay_ms
        raise TopologyError(f"{self.source}: no tree edge {a}-{b}")

    def wan_link(self, a: str, b: str, tree: bool = False) -> Link:
        """The emulated link from node ``a`` to node ``b`` (regions or serializers), where the
        WAN control's faults apply too; ``tree``: a tree link, with its edge's artificial delay."""
        latency = (
            self.link_latency_ms(a, b)
            if tree
            else self.latency_ms_between(self.node_site(a), self.node_site(b))
        )
        return Link(latency, self.jitter_ms, sites=(self.node_site(a), self.node_site(b)))

    def link_latency_ms(self, a: str, b: str) -> float:
        """What a label pays on the tree link a→b: the WAN latency plus the artificial delay."""
        return self.latency_ms_between(self.node_site(a), self.node_site(b)) + self.edge_delay_ms(a, b)

    @cached_property
    def regions_behind(self) -> dict[tuple[str, str], frozenset[str]]:
        """(node, neighbour) → the regions reached through that neighbour: where a label may go."""
        regions = set(self.region_names)
        behind: dict[tuple[str, str], frozenset[str]] = {}
        for node, neighbours in self.tree_neighbours.items():
            for first in neighbours:
                seen, stack = {node}, [first]
                while stack:
                    current = stack.pop()
                    if current not in seen:
                        seen.add(current)
                        stack.extend(self.tree_neighbours.get(current, ()))
                behind[(node, first)] = frozenset((seen - {node}) & regions)
        return behind

    def tree_endpoint(self, node: str) -> str:
        """Where a tree node receives labels: a serializer's port, or a region's replication
        endpoint (the bulk receiver's server, which also hosts the remote proxy)."""
        return self.tree_endpoints(node)[0]

    def tree_endpoints(self, node: str) -> list[str]:
        """Every replica's ``tree_endpoint`` (one but for a serializer with replicas)."""
        if node in self.region_names:
            return [self.bulk_endpoint(node)]
        host = self.node_host(node)
        return [f"{host}:{self.serializer_port(node, r)}" for r in range(self.replicas(node))]

    def tree_path(self, a: str, b: str) -> list[str]:
        """The tree's nodes from region a to region b, both included."""

        def walk(node: str, previous: str | None) -> list[str] | None:
            if node == b:
                return [node]
            for nxt in self.tree_neighbours.get(node, ()):
                if nxt != previous and (rest := walk(nxt, node)) is not None:
                    return [node, *rest]
            return None

        found = walk(a, None)
        if found is None:
            raise TopologyError(f"{self.source}: no tree path {a} → {b}")
        return found

    def tree_path_ms(self, a: str, b: str) -> float:
        """Label travel time from region a to region b along the tree (links plus delays)."""
        return sum(self.link_latency_ms(x, y) for x, y in itertools.pairwise(self.tree_path(a, b)))

    def all_addresses(self) -> list[tuple[str, str, int]]:
        """(owner, host, port) of every port a deployment of this topology listens on."""
        nodes = [(owner, self.node_host(node), port) for owner, node, port in self._ports()]
        return nodes + [(_relay_owner(r), r.host, r.port) for r in self.relay_routes]

    def all_ports(self) -> list[tuple[str, int]]:
        return [(owner, port) for owner, _, port in self.all_addresses()]

    def _ports(self) -> list[tuple[str, str, int]]:
        ports = []
        for r in self.regions:
            ports += [
                (f"{r.name}.frontend", r.name, self.frontend_port(r.name)),
                (f"{r.name}.bulk", r.name, self.bulk_port(r.name)),
                (f"{r.name}.metrics", r.name, self.metrics_port(r.name)),
                (f"{r.name}.web", r.name, self.web_port(r.name)),
                (f"{r.name}.broker", r.name, self.broker_port(r.name)),
            ]
            nodes = range(self.store_nodes(r.name))
            ports += [(f"{r.name}.redis{k}", r.name, self.redis_port(r.name, k)) for k in nodes]
            if self.store.engine == "cluster":
                ports += [(f"{r.name}.redis{k} bus", r.name, self.cluster_bus_port(r.name, k)) for k in nodes]
        ports += [
            (f"serializer {s.name}" + (f" replica {r}" if r else ""), s.name, self.serializer_port(s.name, r))
            for s in self.serializers
            for r in range(s.replicas)
        ]
        return ports


def host_variable(node: str) -> str:
    """The environment variable that may give a node's host: SATURN_HOST_<NAME> (upper case,
    anything but letters and digits as ``_``)."""
    return "SATURN_HOST_" + re.sub(r"[^A-Z0-9]", "_", node.upper())


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


def _relay_owner(route: Route) -> str:
    return f"relay {route.pair} ({route.from_site} to {route.endpoint}, {route.cls})"


def _between(table: dict[str, dict[str, float]], a: str, b: str) -> float | None:
    """A site pair's value in a ``[latency_ms]``-shaped table (given either way round), or None."""
    if b in table.get(a, {}):
        return table[a][b]
    return table.get(b, {}).get(a)
