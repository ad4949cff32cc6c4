"""The synthetic workload's traffic between two regions, for the configuration generator
(paper §5.5: the tree is chosen for the pairs that exchange the most): what ``traffic_weights``
gives, and ``python -m loadtest bench synthetic weights TOPOLOGY --correlation C`` writes as the
JSON ``services.configure --weights`` reads. The workload itself: synthetic_family.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from loadtest.bench.synthetic_family import CORRELATIONS, Buckets, inclusion
from loadtest.harness.experiment import PASSED, Experiment
from services.topology import Topology


def traffic_weights(buckets: Buckets, correlation: str) -> dict[str, dict[str, float]]:
    """Per pair of regions, the updates they exchange per write of each (every region writing at
    the same rate): the chance that one's bucket holds the other, both ways. Remote reads are
    left out (the defaults have none)."""
    n = len(buckets.regions)
    weights: dict[str, dict[str, float]] = {}
    for a, b in itertools.combinations(buckets.regions, 2):
        both_ways = sum(
            inclusion(correlation, buckets.others[origin].index(other) + 1, n)
            for origin, other in ((a, b), (b, a))
        )
        weights.setdefault(a, {})[b] = round(both_ways, 6)
    return weights


def arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", required=True)
    weights = commands.add_parser(
        "weights",
        help="write the weights JSON for a topology and a correlation (services.configure --weights)",
    )
    weights.add_argument("topology", type=Path)
    weights.add_argument("--correlation", choices=CORRELATIONS, default="exponential")
    weights.add_argument("--out", type=Path, help="the JSON file to write (default: print to stdout)")


def run(args: argparse.Namespace) -> int:
    assert args.command == "weights"
    text = json.dumps(traffic_weights(Buckets(Topology.load(args.topology)), args.correlation), indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return PASSED


EXPERIMENT = Experiment(
    name="synthetic",
    summary="the synthetic workload's traffic per pair of regions, for services.configure --weights",
    minutes=(0.1, 0.1),  # a computation: no cluster
    run=run,
    arguments=arguments,
    about=__doc__ or "",
)
