"""Where each node of a topology is reached: ports, hosts, endpoints and URLs of the stores,
gateways, bulk receivers, web apps, brokers, metrics and serializers, and a region's shards."""

from __future__ import annotations

import re
from functools import cached_property

from causal_client.tls import http_scheme, redis_scheme
from causal_client.wire import shard_of, shard_tag
from services.auth import redis_credentials
from services.topology_fields import (
    CLUSTER_BUS_PORTS,
    SERIALIZER_EPOCH_STRIDE,
    TopologyError,
    TopologyFields,
    site_pair_value,
)
from services.wan import Relays
from services.wan.routes import RELAY_PORT_OFFSET, Route, relay_routes


class TopologyAddresses(TopologyFields):
    """Ports and hosts (module doc)."""

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

    def bandwidth_mbit_between(self, site_a: str, site_b: str) -> float | None:
        """The link's capacity each way between two sites (Mbit/s), None where unlimited."""
        return site_pair_value(self.bandwidth_mbit, site_a, site_b)

    @cached_property
    def relay_routes(self) -> list[Route]:
        """Every relay port and what it carries (services/wan/routes.py)."""
        return relay_routes(self)

    @cached_property
    def relays(self) -> Relays:
        """Where a connection from a site to an endpoint goes (through its link's relay or not)."""
        return Relays([(r.from_site, r.endpoint, r.cls, r.via) for r in self.relay_routes])


def host_variable(node: str) -> str:
    """The environment variable that may give a node's host: SATURN_HOST_<NAME> (upper case,
    anything but letters and digits as ``_``)."""
    return "SATURN_HOST_" + re.sub(r"[^A-Z0-9]", "_", node.upper())


def _relay_owner(route: Route) -> str:
    return f"relay {route.pair} ({route.from_site} to {route.endpoint}, {route.cls})"
