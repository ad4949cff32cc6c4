"""A load-test plan: the social graph, where each user's data lives, and the topology that holds it.

A plan is a directory, made once (``python -m loadtest plan``) and read by every Locust process:

    graph.txt.gz     the friendship graph (loadtest/workload/graph.py)
    placement.json   each user's home region and replicas (loadtest/workload/placement.py)
    topology.toml    the base topology plus one replication group per replica set in use

Locust processes read the topology the cluster actually runs (the launcher's
``<run dir>/topology.json``, with its ports) next to the plan's graph and placement.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtest.workload.graph import SocialGraph, generate
from loadtest.workload.placement import Placement, place, write_topology
from services.topology import Topology, load_topology

GRAPH_FILE = "graph.txt.gz"
PLACEMENT_FILE = "placement.json"
TOPOLOGY_FILE = "topology.toml"


class PlanError(ValueError):
    """The plan directory is missing a file or does not fit the topology; the message says which."""


@dataclass(frozen=True)
class Plan:
    graph: SocialGraph
    placement: Placement
    topology: Topology

    @classmethod
    def load(cls, plan_dir: str | Path, topology: str | Path | None = None) -> Plan:
        """The plan in ``plan_dir``; ``topology`` is the running cluster's (default: the plan's)."""
        plan_dir = Path(plan_dir)
        for name in (GRAPH_FILE, PLACEMENT_FILE, TOPOLOGY_FILE):
            if not (plan_dir / name).is_file():
                raise PlanError(f"{plan_dir}: no {name}; make the plan with `python -m loadtest plan`")
        graph = SocialGraph.load(plan_dir / GRAPH_FILE)
        placement = Placement.load(plan_dir / PLACEMENT_FILE)
        running = load_topology(str(topology or plan_dir / TOPOLOGY_FILE))
        plan = cls(graph, placement, running)
        plan.check()
        return plan

    def check(self) -> None:
        if len(self.placement.home) != self.graph.users:
            raise PlanError(
                f"the placement covers {len(self.placement.home)} users, the graph has {self.graph.users}"
            )
        missing = sorted(set(self.placement.groups()) - set(self.topology.group_members))
        if missing:
            raise PlanError(
                f"{self.topology.source} lacks the placement's groups {missing[:3]}: run the plan's "
                f"{TOPOLOGY_FILE}, not the base topology"
            )


def make_plan(
    base: Topology,
    out_dir: str | Path,
    users: int,
    seed: int = 1,
    min_replicas: int = 2,
    max_replicas: int = 3,
    graph: SocialGraph | None = None,
) -> Plan:
    """Generates (or takes) the graph, places it and writes the plan's three files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = graph or generate(users, seed=seed)
    placement = place(graph, base, min_replicas=min_replicas, max_replicas=max_replicas, seed=seed)
    graph.save(out_dir / GRAPH_FILE)
    placement.save(out_dir / PLACEMENT_FILE)
    write_topology(base, placement, out_dir / TOPOLOGY_FILE, name=f"{base.name}-fb{graph.users}")
    return Plan.load(out_dir)
