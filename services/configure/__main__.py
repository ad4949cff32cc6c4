"""The configuration generator (paper §5, Algorithm 3): where serializers run, how they connect
and each link's artificial delay, for a topology's regions.

    python -m services.configure topologies/ec2-7region.toml --out ec2-7region-m.toml

Prints, per pair of regions, the bulk latency, the label's path in the generated tree and the
mismatch, then the tree and the solve time; ``--out`` writes the topology with that tree (every
other setting as in the input).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
import tomllib
from pathlib import Path

import tomli_w

from services.configure.output import Config, simplify
from services.configure.placement import Instance
from services.configure.search import find_configuration
from services.topology import Topology, TopologyError


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


def write_topology(source: Path, config: Config, out: Path, header: str) -> None:
    with source.open("rb") as file:
        data = tomllib.load(file)
    data["name"] = out.stem  # the file's name (Topology checks it)
    data["protocol"] = "saturn"
    data["serializers"] = [{"name": name, "site": site} for name, site in config.serializers]
    data["tree"] = [
        {"a": a, "b": b, **({"delay_ms": delay} if delay else {})} for a, b, delay in config.edges
    ]
    Topology.from_dict(json.loads(json.dumps(data)))  # what is written must load
    out.write_text(header + tomli_w.dumps(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.configure", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("topology", type=Path)
    parser.add_argument(
        "--weights", type=Path, help="JSON weights per pair (default: shared replication groups)"
    )
    parser.add_argument(
        "--candidates", help="sites where serializers may run, comma-separated (default: the regions')"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        help="ms between consecutive ranked shapes that ends the kept list (default 2)",
    )
    parser.add_argument("--beam", type=int, default=8, help="shapes kept per round at most (default 8)")
    parser.add_argument("--out", type=Path, help="write the topology with the generated tree here")
    args = parser.parse_args(argv)
    try:
        topology = Topology.load(args.topology)
        weights = weights_from_file(topology, args.weights) if args.weights else weights_from_groups(topology)
        candidates = [s for s in args.candidates.split(",") if s] if args.candidates else None
        instance = instance_for(topology, weights, candidates)
        if args.beam < 1 or args.threshold < 0:
            raise ConfigureError("--beam must be at least 1 and --threshold at least 0")
        if len(topology.region_names) < 2:
            raise ConfigureError("a tree needs at least two regions")
    except (TopologyError, ConfigureError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    where = ", ".join(instance.candidates)
    print(f"{topology.name}: {len(topology.region_names)} regions, serializers may run at {where}")
    started = time.perf_counter()
    search = find_configuration(instance, topology.region_names, args.threshold, args.beam, progress=print)
    seconds = time.perf_counter() - started
    best = search.best
    config = simplify(best, instance)
    print(f"\n{'pair':<26} {'weight':>6} {'bulk ms':>8} {'tree ms':>8} {'mismatch':>9}")
    for a, b in itertools.combinations(topology.region_names, 2):
        bulk, path = instance.bulk_ms(a, b), best.path_ms(a, b, instance)
        weight = weights.get(frozenset((a, b)), 0.0)
        print(f"{a + ' ↔ ' + b:<26} {weight:>6.1f} {bulk:>8.1f} {path:>8.1f} {path - bulk:>+9.1f}")
    print(
        f"\nweighted mean mismatch {best.mean_mismatch:.2f} ms; {search.placed} shapes placed "
        f"(kept per round {search.kept_per_round}) in {seconds:.1f} s (HiGHS via SciPy)"
    )
    print("serializers: " + ", ".join(f"{name} at {site}" for name, site in config.serializers))
    for a, b, delay in config.edges:
        print(f"  {a} — {b}" + (f"  (+{delay:g} ms)" if delay else ""))
    if args.out:
        command = " ".join(["python -m services.configure", *(argv if argv is not None else sys.argv[1:])])
        header = (
            f"# Generated by `{command}` (paper §5, Algorithm 3):\n"
            f"# weighted mean mismatch {best.mean_mismatch:.2f} ms between label paths and bulk links.\n"
        )
        write_topology(args.topology, config, args.out, header)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
