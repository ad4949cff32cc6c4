"""A topology's tree of serializers and the WAN between its sites: neighbours, paths, the
regions behind an edge, latencies and bandwidths, the emulated link between two nodes."""

from __future__ import annotations

import itertools
from collections import defaultdict
from functools import cached_property

from services.topology_addresses import TopologyAddresses
from services.topology_fields import TopologyError, site_pair_value
from services.wan import Link


class TopologyTree(TopologyAddresses):
    """The tree and the WAN (module doc)."""

    def _raw_latency(self, a: str, b: str) -> float | None:
        return site_pair_value(self.latency_ms, a, b)

    def latency_ms_between(self, site_a: str, site_b: str) -> float:
        """One-way emulated latency between two sites (0 for the same site or no emulation)."""
        if site_a == site_b:
            return 0.0
        value = self._raw_latency(site_a, site_b)
        return float(value) if value is not None else 0.0

    def region_latency_ms(self, a: str, b: str) -> float:
        return self.latency_ms_between(self.region(a).site, self.region(b).site)

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
