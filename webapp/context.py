"""Where this web app runs: its topology, its region, and the one CausalClient it shares.

Each region runs its own web app (and Celery worker); they differ only in SATURN_REGION. The
client is made once per process and shared by its threads (sessions are per request).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from causal_client import CausalClient
from services.topology import Topology, TopologyError, load_topology


@dataclass
class RegionContext:
    topology: Topology
    region: str

    @cached_property
    def client(self) -> CausalClient:
        """Calls to other regions pay the emulated WAN latency from this region's site."""
        return CausalClient.connect(
            self.topology.store_endpoints(self.region),  # the first that answers
            site=self.topology.region(self.region).site,
            endpoints=self.topology.client_endpoints(),
        )

    @cached_property
    def accounts_group(self) -> str:
        """Accounts (and the public line) live in a group replicated everywhere: a user can log
        in at any region. ``all`` when the topology has it."""
        everywhere = [
            g for g, members in self.topology.group_members.items() if set(members) == set(self.regions)
        ]
        if not everywhere:
            raise ImproperlyConfigured(
                f"{self.topology.source}: the web app needs a group replicated in every region"
            )
        return "all" if "all" in everywhere else everywhere[0]

    @property
    def regions(self) -> list[str]:
        return self.topology.region_names

    def home_group(self, region: str | None = None) -> str:
        """Where a user who signs up in ``region`` keeps their tweets, timeline and follows: the
        smallest group there replicated in at least two regions (genuine partial replication when
        the topology has such groups), else the accounts group."""
        region = region or self.region
        here = [(len(m), g) for g, m in self.topology.group_members.items() if region in m and len(m) >= 2]
        return min(here)[1] if here else self.accounts_group

    def replicates(self, group: str, region: str | None = None) -> bool:
        return (region or self.region) in self.topology.group_members.get(group, ())

    def closest_replica(self, group: str, near: str | None = None) -> str:
        """The region replicating ``group`` nearest to ``near`` (this region by default; itself
        if it replicates the group), as the client library picks it for a migration."""
        found = self.client.closest_replica(group, near=near or self.region)
        if found is None:
            raise ImproperlyConfigured(f"no region replicates group {group!r}")
        return found

    def web_url(self, region: str) -> str:
        return self.topology.web_url(region)


_lock = threading.Lock()
_current: RegionContext | None = None


def current() -> RegionContext:
    """This process's region context, from settings (made on first use)."""
    global _current
    with _lock:
        if _current is None:
            try:
                topology = load_topology(settings.SATURN_TOPOLOGY)
            except (TopologyError, OSError, ValueError) as exc:
                raise ImproperlyConfigured(str(exc)) from None
            region = settings.SATURN_REGION or topology.region_names[0]
            if region not in topology.region_names:
                raise ImproperlyConfigured(
                    f"SATURN_REGION={region!r} is not a region of {topology.source} "
                    f"({', '.join(topology.region_names)})"
                )
            _current = RegionContext(topology, region)
        return _current


def reset() -> None:
    """Forgets the context (tests that switch topologies or regions)."""
    global _current
    with _lock:
        if _current is not None and "client" in _current.__dict__:
            _current.client.close()
        _current = None
