"""The paper's synthetic workload (§7.3.2, its Fig. 5): closed-loop clients at every region read
and write rows of *buckets*, a bucket being one set of regions that replicate it.

Each operation draws its bucket afresh, as the authors' benchmark driver does: the client's own
region plus each other region, taken in order of distance (1 = the closest), with the
probability the *correlation* gives it:

- ``exponential``: 1/2^k (50 %, 25 %, 12.5 %, ...): a strongly partial setting, where distant
  regions share little;
- ``proportional``: (N - k)/N for N regions (with 7: 86 %, 71 %, ..., 14 %): a smoother one;
- ``uniform``: 1/2 for every region (every bucket that holds the client's region equally likely);
- ``full``: every region (full replication).

So every non-empty set of regions is a bucket: ``write_topology`` adds one replication group per
set (127 for seven regions), named ``syn.`` + its regions. A *remote read* (a share of the
reads) draws a bucket the same way from the other regions only (drawn again while empty) and
reads it where it is closest: the session migrates there, reads, and migrates back home, the
attach the paper describes for GentleRain and Cure ("the receiving datacenter only returns to the
client when the stable time is equal or larger than the client's timestamp"), and Saturn's
migration label. Under ``full`` nothing is remote, so a remote read is a local one.

The authors' driver rounds the probabilities to whole percents (``trunc``); this one uses them
exactly. Rows: ``KEYS_PER_BUCKET`` per bucket, column ``v``, preloaded with the point's value
size (``preload``) so that reads return values of that size.

Fig. 1b's *replication degree* d replaces the draw: a bucket is the client's region and its d - 1
closest others (``Mix.replicas``), "until only datacenters close to each other replicate the same
data".

The workload's traffic between two regions, for the configuration generator (paper §5.5: the
tree is chosen for the pairs that exchange the most), is what ``traffic_weights`` gives and
``python -m loadtest bench synthetic weights TOPOLOGY --correlation C`` writes as the JSON
``services.configure --weights`` reads.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from causal_client import CausalClient, Mutation
from loadtest import topology_file
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.loop import Op
from loadtest.harness.metrics import Pair, scrape_visibility
from loadtest.harness.report import say
from loadtest.harness.visibility import DRAIN_TIMEOUT_S, wait_replicated
from services.topology import Topology

CORRELATIONS = ("exponential", "proportional", "uniform", "full")
GROUP_PREFIX = "syn"
KEYS_PER_BUCKET = 50
COLUMN = "v"


@dataclass(frozen=True)
class Mix:
    """One point of the workload space; the defaults are the paper's."""

    value_bytes: int = 2
    read_fraction: float = 0.9
    correlation: str = "exponential"
    remote_read_fraction: float = 0.0  # of the reads
    replicas: int = 0  # 0: the correlation draws each bucket; d: home and its d - 1 closest regions

    def __post_init__(self) -> None:
        if self.correlation not in CORRELATIONS:
            raise ValueError(f"correlation {self.correlation!r}: one of {', '.join(CORRELATIONS)}")
        if self.replicas < 0:
            raise ValueError("replicas must be 0 (the correlation decides) or a replication degree")
        if not (0 <= self.read_fraction <= 1 and 0 <= self.remote_read_fraction <= 1):
            raise ValueError("read_fraction and remote_read_fraction are fractions (0 to 1)")
        if self.value_bytes < 1:
            raise ValueError("value_bytes must be at least 1")

    @property
    def name(self) -> str:
        reads = round(100 * self.read_fraction)
        remote = round(100 * self.remote_read_fraction)
        spread = f"{self.replicas} closest replicas" if self.replicas else self.correlation
        return f"{self.value_bytes} B, {reads}:{100 - reads}, {spread}, {remote} % remote"


def inclusion(correlation: str, rank: int, regions: int) -> float:
    """The probability that the ``rank``-th closest other region (1 = the closest) replicates a
    bucket a client draws, among ``regions`` regions in all."""
    match correlation:
        case "exponential":
            return 2.0**-rank
        case "proportional":
            return (regions - rank) / regions
        case "uniform":
            return 0.5
        case "full":
            return 1.0
    raise ValueError(f"correlation {correlation!r}: one of {', '.join(CORRELATIONS)}")


class Buckets:
    """The topology's regions, each one's others by distance, and every bucket's group."""

    def __init__(self, topology: Topology):
        self.regions = tuple(topology.region_names)
        self.others = {
            r: sorted(
                (o for o in self.regions if o != r),
                key=functools.partial(_nearest_first, topology, self.regions, r),
            )
            for r in self.regions
        }

    def group(self, members: Sequence[str]) -> str:
        return topology_file.group_name(self.regions, members, GROUP_PREFIX)

    def groups(self) -> dict[str, list[str]]:
        """Every non-empty set of regions, as a replication group (members in topology order)."""
        found = {}
        for size in range(1, len(self.regions) + 1):
            for members in itertools.combinations(self.regions, size):
                found[self.group(members)] = list(members)
        return found

    def _draw(self, region: str, correlation: str, rng: random.Random) -> list[str]:
        n = len(self.regions)
        return [
            o for k, o in enumerate(self.others[region], 1) if rng.random() < inclusion(correlation, k, n)
        ]

    def local(self, region: str, correlation: str, rng: random.Random, replicas: int = 0) -> str:
        """A bucket replicated at ``region``: drawn by ``correlation``, or with ``replicas``, the
        region and its ``replicas - 1`` closest others."""
        if replicas:
            return self.group([region, *self.others[region][: replicas - 1]])
        return self.group([region, *self._draw(region, correlation, rng)])

    def remote(self, region: str, correlation: str, rng: random.Random) -> tuple[str, str] | None:
        """A bucket not replicated at ``region`` and the closest region that replicates it; None
        under full replication (nothing is remote)."""
        if correlation == "full":
            return None
        while not (members := self._draw(region, correlation, rng)):
            pass
        return self.group(members), members[0]  # drawn in order of distance


def write_topology(base: Topology, out_path: str | Path) -> Path:
    """``base`` plus one group per bucket (every non-empty set of its regions)."""
    groups = Buckets(base).groups()
    about = f"one replication group per bucket of the synthetic workload ({len(groups)} groups)."
    return topology_file.write_with_groups(base, groups, out_path, f"{base.name}-synthetic", about)


def row(rng: random.Random) -> str:
    return f"k{rng.randrange(KEYS_PER_BUCKET)}"


def client_op(client: CausalClient, home: str, buckets: Buckets, mix: Mix, seed: int) -> Op:
    """One closed-loop client at ``home`` (``client`` runs at home's site), with its own session."""
    session = client.session(home)
    rng = random.Random(seed)
    value = b"x" * mix.value_bytes
    columns = [COLUMN]

    def op() -> bool:
        if rng.random() >= mix.read_fraction:
            session.write(buckets.local(home, mix.correlation, rng, mix.replicas), row(rng), {COLUMN: value})
            return True
        remote = (
            buckets.remote(home, mix.correlation, rng) if rng.random() < mix.remote_read_fraction else None
        )
        if remote is None:
            session.read(buckets.local(home, mix.correlation, rng, mix.replicas), row(rng), columns)
            return False
        group, closest = remote
        session.migrate(closest)
        try:
            session.read(group, row(rng), columns)
        finally:
            session.migrate(home)
        return False

    return op


def preload(clients: Mapping[str, CausalClient], buckets: Buckets, value_bytes: int) -> dict[Pair, int]:
    """Every row of every bucket written once, at the bucket's first region, with values of
    ``value_bytes``; returns how many updates each (origin, region) pair must see."""
    value = b"x" * value_bytes
    sessions = {region: client.session(region) for region, client in clients.items()}
    expected: Counter[Pair] = Counter()
    for group, members in buckets.groups().items():
        origin = members[0]
        rows = [Mutation(group, f"k{i}").set(COLUMN, value) for i in range(KEYS_PER_BUCKET)]
        sessions[origin].batch(rows, atomic=False)  # one update per row: counted so
        for region in members[1:]:
            expected[origin, region] += KEYS_PER_BUCKET
    return dict(expected)


def preload_replicated(
    label: str, topology: Topology, clients: Mapping[str, CausalClient], buckets: Buckets, size: int
) -> None:
    """``preload``, then waits until every update reached every replica before anything is
    measured (else the first point would count the preload's replication in its visibility)."""
    began = time.monotonic()
    before = scrape_visibility(topology)
    expected = preload(clients, buckets, size)
    _, short = wait_replicated(topology, before, expected, DRAIN_TIMEOUT_S)
    rows = sum(expected.values())
    say(
        f"[{label}]   preloaded rows of {size} B and replicated {rows:,} updates in "
        f"{time.monotonic() - began:.1f} s" + (f"; still missing: {short}" if short else "")
    )


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


def _nearest_first(topology: Topology, regions: tuple[str, ...], here: str, other: str) -> tuple[float, int]:
    """A sort key: ``other``'s latency from ``here``, then its place in the topology."""
    return topology.region_latency_ms(here, other), regions.index(other)
