"""Prints, for each ordered pair of regions, the bulk-data latency and the label's path along the
serializer tree (links plus artificial delays): where Saturn can be as fresh as eventual
consistency (path ≤ direct) and where labels lag (path > direct).

    python -m services.tree_report topologies/ec2-7region.toml
"""

from __future__ import annotations

import argparse
import sys

from services.topology import Topology, TopologyError


def rows(topology: Topology) -> list[tuple[str, str, float, float]]:
    names = topology.region_names
    return [
        (a, b, topology.region_latency_ms(a, b), topology.tree_path_ms(a, b))
        for a in names
        for b in names
        if a != b
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.tree_report", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("topology", help="a topology file with a serializer tree")
    args = parser.parse_args(argv)
    try:
        topology = Topology.load(args.topology)
        table = rows(topology)
    except TopologyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{'origin -> region':<26} {'bulk ms':>8} {'tree ms':>8} {'label lag ms':>13}")
    for a, b, direct, tree in table:
        print(f"{a + ' -> ' + b:<26} {direct:>8.0f} {tree:>8.0f} {tree - direct:>+13.0f}")
    lags = [tree - direct for _, _, direct, tree in table]
    on_time = sum(lag <= 0 for lag in lags)
    print(f"{on_time} of {len(lags)} pairs have a tree path no longer than the bulk link; "
          f"mean lag {sum(max(0, x) for x in lags) / len(lags):.1f} ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
