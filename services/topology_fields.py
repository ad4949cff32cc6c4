"""A topology's fields, as the file gives them, and the lookups everything else builds on (its
regions, sites and groups). Validated as a whole by ``services.topology.Topology``."""

from __future__ import annotations

from functools import cached_property
from typing import Literal

from pydantic import Field

from services.topology_parts import (
    HOST_PATTERN,
    MAX_STORE_NODES,
    Region,
    Serializer,
    StoreSettings,
    StrictModel,
    TreeEdge,
)
from services.traits import Traits, traits_of
from services.tuning import SaturnTuning, StabilizationTuning, StrongSettings

ALL_REGIONS = "*"
# Serializers of odd epochs listen this far above even epochs' (both trees run during a switch).
SERIALIZER_EPOCH_STRIDE = 32
# A cluster region's nodes' bus ports: a block per region above the serializers' (below the relays').
CLUSTER_BUS_PORTS = MAX_STORE_NODES


class TopologyError(ValueError):
    """The topology file is missing, unreadable or inconsistent; the message says where."""


class TopologyFields(StrictModel):
    """The fields, and the regions, sites and groups they name."""

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

    @property
    def traits(self) -> Traits:
        """What its protocol is (services/traits.py): everything else reads these, not its name."""
        return traits_of(self.protocol)

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

    @cached_property
    def node_names(self) -> list[str]:
        """Regions and serializers: everything that runs somewhere."""
        return [*self.region_names, *(s.name for s in self.serializers)]


def site_pair_value(table: dict[str, dict[str, float]], a: str, b: str) -> float | None:
    """A site pair's value in a ``[latency_ms]``-shaped table (given either way round), or None."""
    if b in table.get(a, {}):
        return table[a][b]
    return table.get(b, {}).get(a)
