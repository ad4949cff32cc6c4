"""What the generator reads: a topology's sites and latencies, the weight of each pair of regions
(what they exchange), the sites where serializers may run; and ``generate``, the whole search for
callers that want a tree without the command line (the benches that build topologies)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from services.configure.output import Config, simplify
from services.configure.placement import Instance
from services.configure.search import find_configuration
from services.topology import Topology


class ConfigureError(ValueError):
    """Bad input to the generator (a weights file, a candidate site)."""


def weights_from_groups(topology: Topology) -> dict[frozenset[str], float]:
    """c_ij = the number of replication groups both regions hold (what they exchange), at least
    0.1: migrations and heartbeats travel between every pair."""
    return {
        frozenset((a, b)): max(0.1, float(len(topology.groups_at(a) & topology.groups_at(b))))
        for a, b in itertools.combinations(topology.region_names, 2)
    }


def weights_from_file(topology: Topology, path: Path) -> dict[frozenset[str], float]:
    """A JSON object {"region": {"other region": weight, ...}, ...}; a pair given twice must agree,
    pairs not given weigh 0."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigureError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigureError(f"{path}: expected an object of objects of weights")
    weights: dict[frozenset[str], float] = {}
    for a, row in data.items():
        if not isinstance(row, dict):
            raise ConfigureError(f"{path}: {a!r}: expected an object of weights")
        for b, value in row.items():
            for region in (a, b):
                if region not in topology.region_names:
                    raise ConfigureError(f"{path}: unknown region {region!r}")
            if a == b or not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ConfigureError(f"{path}: {a} → {b}: a weight is a number >= 0 between two regions")
            pair = frozenset((a, b))
            if pair in weights and weights[pair] != value:
                raise ConfigureError(f"{path}: {a} ↔ {b} given twice with different weights")
            weights[pair] = float(value)
    if not any(weights.values()):
        raise ConfigureError(f"{path}: every weight is 0")
    return weights


def instance_for(
    topology: Topology, weights: dict[frozenset[str], float], candidates: list[str] | None
) -> Instance:
    sites = {r.name: r.site for r in topology.regions}
    known = (
        set(sites.values())
        | {s for row in topology.latency_ms.values() for s in row}
        | set(topology.latency_ms)
    )
    chosen = sorted(set(sites.values())) if candidates is None else candidates
    for site in chosen:
        if site not in known:
            raise ConfigureError(f"candidate site {site!r} has no latencies in {topology.name}")
    return Instance(sites, chosen, topology.latency_ms_between, weights)


def generate(topology: Topology, weights: dict[frozenset[str], float] | None = None) -> tuple[Config, float]:
    """The tree Algorithm 3 finds for ``topology`` (``weights``: default, shared groups) and its
    weighted mean mismatch (ms), with the command line's defaults."""
    instance = instance_for(topology, weights or weights_from_groups(topology), None)
    best = find_configuration(instance, topology.region_names).best
    return simplify(best, instance), best.mean_mismatch
