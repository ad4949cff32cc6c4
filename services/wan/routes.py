"""Which relay port carries which connection, derived from the topology alone, so that every
process (and every client, through ``describe``) computes the same table.

For every site pair whose link has a bandwidth (``[bandwidth_mbit]``), one relay process
(``relay.<site>-<site>``) listens, per endpoint at either site that the other site connects to
and per traffic class that endpoint takes, on a port of its own:

- a region's stores: ``data`` (a client's reads and writes) and ``meta`` (attaches, claims);
- a region's bulk receiver: ``ship`` (bulk payloads) and ``meta`` (labels on tree and C3 links);
- a serializer replica: ``meta``;
- and, per direction, a flood port (``services/relay/relay.py``).

The class is chosen by the connecting side (it knows what it sends), as a DSCP mark would be on
a real network; the relay schedules each direction's bytes by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from services.topology_parts import Region, Serializer

RELAY_PORT_OFFSET = 100  # relay ports start this far above the serializers' blocks
FLOOD = "flood"  # per direction, a port whose bytes cross the link as bulk and are dropped (the relay)
DISCARD = "discard"  # a flood route's endpoint


@dataclass(frozen=True)
class Route:
    pair: str  # "A-C": the relay process (sites in topology order)
    from_site: str
    to_site: str
    endpoint: str  # host:port it forwards to
    cls: str  # traffic class (causal_client.wan.TRAFFIC_CLASSES)
    port: int  # where the relay listens for it
    host: str

    @property
    def via(self) -> str:
        return f"{self.host}:{self.port}"


class Topology(Protocol):
    """What routes read of a topology. services/topology.py's ``Topology`` is one, and asks this
    module for its routes: naming the members here, rather than importing the class, keeps the
    two modules from importing each other."""

    host: str
    regions: list[Region]
    serializers: list[Serializer]

    @property
    def sites(self) -> list[str]: ...

    @property
    def relay_routes(self) -> list[Route]: ...

    def relay_base_port(self) -> int: ...

    def bandwidth_mbit_between(self, site_a: str, site_b: str) -> float | None: ...

    def store_endpoints(self, region: str) -> list[str]: ...

    def bulk_endpoint(self, region: str) -> str: ...

    def tree_endpoints(self, node: str) -> Sequence[str]: ...


def pair_name(a: str, b: str, sites: list[str]) -> str:
    first, second = sorted((a, b), key=sites.index)
    return f"{first}-{second}"


def endpoints_at(topology: Topology, site: str) -> list[tuple[str, tuple[str, ...]]]:
    """(endpoint, its traffic classes) of everything at ``site`` that another site connects to."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for r in topology.regions:
        if r.site == site:
            found += [(store, ("data", "meta")) for store in topology.store_endpoints(r.name)]
            found.append((topology.bulk_endpoint(r.name), ("ship", "meta")))
    for s in topology.serializers:
        if s.site == site:
            found += [(endpoint, ("meta",)) for endpoint in topology.tree_endpoints(s.name)]
    return found


def relay_routes(topology: Topology) -> list[Route]:
    sites = topology.sites
    port = topology.relay_base_port()
    routes = []
    for i, a in enumerate(sites):
        for b in sites[i + 1 :]:
            if topology.bandwidth_mbit_between(a, b) is None:
                continue
            pair = pair_name(a, b, sites)
            host = topology.host
            for from_site, to_site in ((a, b), (b, a)):
                for endpoint, classes in [*endpoints_at(topology, to_site), (DISCARD, (FLOOD,))]:
                    for cls in classes:
                        routes.append(Route(pair, from_site, to_site, endpoint, cls, port, host))
                        port += 1
    return routes


def flood_endpoint(topology: Topology, from_site: str, to_site: str) -> str:
    """The relay port that floods the link from ``from_site`` to ``to_site`` (KeyError: the link
    has no bandwidth, so nothing can congest it)."""
    for r in topology.relay_routes:
        if r.cls == FLOOD and (r.from_site, r.to_site) == (from_site, to_site):
            return r.via
    raise KeyError(f"no link with a bandwidth from {from_site} to {to_site}")


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``host:port`` → (host, port)."""
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)
