"""Where each user's data lives: a SPAR-like placement of the social graph over the regions.

Saturn's §7.4 spreads the Facebook graph over its regions with SPAR (Pujol et al., "The little
engine(s) that could", SIGCOMM'10), "augmented to limit the maximum number of replicas each partition
may have": every user has a *home* (SPAR's master: the region whose clients the user is), and the
user's data is replicated where the user's friends have theirs, so that reading a friend is local.
Each item has at least ``min_replicas`` replicas (2 in the paper) and at most ``max_replicas``
(2 to 5 in the paper, the x-axis of its Figure 8a).

:func:`place` does it in two steps:

1. **Homes**: a balanced partition that keeps friends together. Users are streamed in the order of a
   breadth-first walk from a seeded start and each is put where most of its already-placed friends
   are, discounted by how full the region is (linear deterministic greedy, Stanton & Kliot,
   KDD'12); then passes of balanced label propagation (Ugander & Backstrom, WSDM'13) move each user
   to the region holding most of its friends, or swap two users who want to trade places, as long
   as every region keeps between ``(1 - BALANCE) n/k`` and ``(1 + BALANCE) n/k`` home users
   (rounded outwards: ``floor`` and ``ceil``; ``BALANCE`` = 5 %).
2. **Replicas**: the home, plus the other regions ranked by how many of the user's friends live
   there (ties: the nearer region to the home, then topology order), keeping only regions where at
   least one friend lives, up to ``max_replicas``; padded up to ``min_replicas`` with the regions
   nearest the home (``Topology.region_latency_ms``). ``max_replicas`` above the number of regions
   is capped to it.

:func:`random_placement` is the baseline (uniform home, uniform replica count, random replicas);
:func:`friend_locality` measures the point of it all: the share of (user, friend) pairs where the
friend's data is replicated at the user's home. Measured on ``generate(users, seed=1)``, seed 1
(``tests/test_load_placement.py -s`` prints the 300- and 2,000-user rows), SPAR-like vs random:

==================  ================  ================  ================
regions, users      2-2 replicas      2-3 replicas      2-5 replicas
==================  ================  ================  ================
3, 2,000            0.850 vs 0.667    1.000 vs 0.831    1.000 vs 0.831
7, 2,000            0.572 vs 0.291    0.737 vs 0.358    0.924 vs 0.498
3, 61,096           0.866 vs 0.667    1.000 vs 0.834    1.000 vs 0.834
7, 61,096           0.584 vs 0.286    0.726 vs 0.359    0.910 vs 0.500
==================  ================  ================  ================

With 3 regions and up to 3 replicas every friend is local: a user's data is replicated wherever a
friend lives, SPAR's own guarantee, once the maximum does not cut it short. Homes alone keep
0.49 (3 regions) and 0.30 (7 regions) of friendships inside a region at 2,000 users, 0.53 and 0.33
at 61,096, against 1/3 and 1/7 at random. Placing 61,096 users takes about 2 s; with 7 regions
it uses 21, 56 and 112 replication groups for 2-2, 2-3 and 2-5 replicas.

File format (:meth:`Placement.save`, conventionally ``placement.json``): one JSON object,
``{"format": "saturn-placement", "version": 1, "regions": [names, topology order],
"min_replicas": m, "max_replicas": M, "method": "...", "users": n, "home": [n region indices],
"replicas": [n ascending lists of region indices]}``, each key on its own line.

Each distinct replica set is a replication group of the topology, named by :func:`group_name`
(``fb.`` and the regions in topology order, e.g. ``fb.virginia.ireland``); :func:`write_topology`
writes the base topology plus those groups.
"""

from __future__ import annotations

import json
import math
import random
import re
from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from pathlib import Path

from loadtest.workload import topology_file
from loadtest.workload.graph import SocialGraph
from services.topology import NAME_PATTERN, Topology

BALANCE = 0.05  # each region's home users stay within floor/ceil of (1 -/+ BALANCE) * users / regions
PASSES = 20  # label-propagation passes at most (they stop earlier once few users move)
GROUP_PREFIX = "fb"
FORMAT = "saturn-placement"
VERSION = 1


def group_name(regions: Sequence[str], members: Sequence[str]) -> str:
    """The replication group of a replica set: ``fb.`` + its regions in topology order (``regions``)."""
    return topology_file.group_name(regions, members, GROUP_PREFIX)


def balance_bounds(users: int, regions: int) -> tuple[int, int]:
    """The fewest and most home users a region may have (``BALANCE`` around the mean)."""
    mean = users / regions
    return math.floor(mean * (1 - BALANCE)), math.ceil(mean * (1 + BALANCE))


@dataclass(frozen=True)
class Placement:
    """Per user: the home region and the regions replicating the user's data (home included)."""

    regions: tuple[str, ...]
    home: tuple[str, ...]
    replicas: tuple[tuple[str, ...], ...]
    min_replicas: int
    max_replicas: int
    method: str

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        if not self.regions or len(set(self.regions)) != len(self.regions):
            raise ValueError(f"regions must be distinct and not empty, got {list(self.regions)}")
        for r in self.regions:
            if not re.match(NAME_PATTERN, r):
                raise ValueError(f"region name {r!r} must match {NAME_PATTERN}")
        _check_bounds(self.min_replicas, self.max_replicas, len(self.regions), cap=False)
        if len(self.home) != len(self.replicas):
            raise ValueError(f"{len(self.home)} homes but {len(self.replicas)} replica sets")
        index = self._index
        for u, (home, replicas) in enumerate(zip(self.home, self.replicas, strict=True)):
            if home not in index:
                raise ValueError(f"user {u}: unknown home region {home!r}")
            if not self.min_replicas <= len(replicas) <= self.max_replicas:
                raise ValueError(
                    f"user {u}: {len(replicas)} replicas, "
                    f"not within [{self.min_replicas}, {self.max_replicas}]"
                )
            if home not in replicas:
                raise ValueError(f"user {u}: home {home!r} is not among the replicas {list(replicas)}")
            at = [index.get(r, -1) for r in replicas]
            if min(at) < 0 or any(a >= b for a, b in pairwise(at)):
                raise ValueError(
                    f"user {u}: replicas {list(replicas)} are not distinct regions in topology order"
                )

    @cached_property
    def _index(self) -> dict[str, int]:
        return {r: i for i, r in enumerate(self.regions)}

    @property
    def users(self) -> int:
        return len(self.home)

    def group_of(self, user: int) -> str:
        """The replication group holding the user's data (its name matches ``NAME_PATTERN``)."""
        return group_name(self.regions, self.replicas[user])

    def groups(self) -> dict[str, list[str]]:
        """Every group the placement uses → its regions (topology order), smallest sets first."""
        found = {replicas: group_name(self.regions, replicas) for replicas in set(self.replicas)}
        ordered = sorted(found, key=lambda rs: (len(rs), [self._index[r] for r in rs]))
        return {found[rs]: list(rs) for rs in ordered}

    def users_at(self, region: str) -> list[int]:
        """The users homed at ``region`` (its clients), ascending."""
        if region not in self._index:
            raise ValueError(f"unknown region {region!r} (have {list(self.regions)})")
        return [u for u, h in enumerate(self.home) if h == region]

    def replicated_at(self, region: str) -> list[int]:
        """The users whose data ``region`` holds, ascending."""
        if region not in self._index:
            raise ValueError(f"unknown region {region!r} (have {list(self.regions)})")
        return [u for u, rs in enumerate(self.replicas) if region in rs]

    # -- the file ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Writes the placement as JSON (format in the module docstring)."""
        path = Path(path)
        index = self._index
        fields = {
            "format": FORMAT,
            "version": VERSION,
            "regions": list(self.regions),
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "method": self.method,
            "users": self.users,
            "home": [index[h] for h in self.home],
            "replicas": [[index[r] for r in rs] for rs in self.replicas],
        }
        body = ",\n".join(
            f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in fields.items()
        )
        path.write_text("{\n" + body + "\n}\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Placement:
        """Reads a file written by :meth:`save`; a bad one raises ValueError naming the file."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError as exc:
            raise ValueError(f"{path}: no such placement file") from exc
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a placement file: {exc}") from exc
        try:
            return cls._from_json(data)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def _from_json(cls, data: object) -> Placement:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} file")
        if data.get("version") != VERSION:
            raise ValueError(f"format version {data.get('version')!r}, expected {VERSION}")
        regions = data["regions"]
        if not isinstance(regions, list) or not all(isinstance(r, str) for r in regions):
            raise ValueError("regions must be a list of names")
        home, replicas = data["home"], data["replicas"]
        if not isinstance(home, list) or not isinstance(replicas, list):
            raise ValueError("home and replicas must be lists")
        if not len(home) == len(replicas) == data["users"]:
            raise ValueError(
                f"users is {data['users']}, but {len(home)} homes and {len(replicas)} replica sets"
            )

        def region(i: object) -> str:
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(regions):
                raise ValueError(f"region index {i!r} out of range 0..{len(regions) - 1}")
            return regions[i]

        for field in ("min_replicas", "max_replicas"):
            if not isinstance(data[field], int):
                raise ValueError(f"{field} must be an integer")
        if not isinstance(data["method"], str):
            raise ValueError("method must be a string")
        return cls(
            regions=tuple(regions),
            home=tuple(region(h) for h in home),
            replicas=tuple(tuple(region(i) for i in rs) for rs in replicas),
            min_replicas=data["min_replicas"],
            max_replicas=data["max_replicas"],
            method=data["method"],
        )


def _check_bounds(min_replicas: int, max_replicas: int, regions: int, cap: bool = True) -> int:
    """Validates the replica bounds; returns the effective maximum (capped by the regions if ``cap``)."""
    for name, value in (("min_replicas", min_replicas), ("max_replicas", max_replicas)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 1 <= min_replicas <= max_replicas:
        raise ValueError(f"need 1 <= min_replicas <= max_replicas, got {min_replicas} and {max_replicas}")
    if min_replicas > regions:
        raise ValueError(f"min_replicas {min_replicas} is more than the {regions} regions")
    if max_replicas > regions and not cap:
        raise ValueError(f"max_replicas {max_replicas} is more than the {regions} regions")
    return min(max_replicas, regions)


# -- placing -------------------------------------------------------------------------------------
def place(
    graph: SocialGraph, topology: Topology, min_replicas: int = 2, max_replicas: int = 5, seed: int = 1
) -> Placement:
    """The SPAR-like placement (algorithm in the module docstring); same arguments, same placement."""
    regions = tuple(topology.region_names)
    k = len(regions)
    top = _check_bounds(min_replicas, max_replicas, k)
    rng = random.Random(f"placement/{seed}")
    friends = graph.friends
    low, high = balance_bounds(graph.users, k)
    homes, size = _greedy_homes(friends, k, rng)
    _rebalance(friends, homes, size, low)
    _refine(friends, homes, size, k, low, high, rng)
    nearest = _nearest(topology, regions)
    replicas = []
    for u, row in enumerate(friends):
        home = homes[u]
        counts = [0] * k
        for f in row:
            counts[homes[f]] += 1
        ranked = sorted(
            (r for r in range(k) if r != home and counts[r]), key=lambda r: (-counts[r], nearest[home][r])
        )
        chosen = {home, *ranked[: top - 1]}
        for r in sorted(nearest[home], key=nearest[home].__getitem__):
            if len(chosen) >= min_replicas:
                break
            chosen.add(r)
        replicas.append(tuple(regions[r] for r in sorted(chosen)))
    method = (
        f"SPAR-like (Pujol et al. 2010): greedy streaming homes + balanced label propagation over "
        f"{k} regions (+-{BALANCE:.0%}), replicas where friends live, {min_replicas}-{top} replicas, "
        f"seed {seed}"
    )
    return Placement(regions, tuple(regions[h] for h in homes), tuple(replicas), min_replicas, top, method)


def random_placement(
    graph: SocialGraph, topology: Topology, min_replicas: int = 2, max_replicas: int = 5, seed: int = 1
) -> Placement:
    """The baseline: a uniform home, a uniform replica count in [min, max] and random other replicas."""
    regions = tuple(topology.region_names)
    k = len(regions)
    top = _check_bounds(min_replicas, max_replicas, k)
    rng = random.Random(f"random-placement/{seed}")
    homes, replicas = [], []
    for _ in range(graph.users):
        home = rng.randrange(k)
        others = rng.sample([r for r in range(k) if r != home], rng.randint(min_replicas, top) - 1)
        homes.append(regions[home])
        replicas.append(tuple(regions[r] for r in sorted([home, *others])))
    method = f"random: uniform home, {min_replicas}-{top} replicas uniformly, seed {seed}"
    return Placement(regions, tuple(homes), tuple(replicas), min_replicas, top, method)


def friend_locality(graph: SocialGraph, placement: Placement) -> float:
    """The share of (user, friend) ordered pairs whose friend's data is replicated at the user's home."""
    if graph.users != placement.users:
        raise ValueError(f"the graph has {graph.users} users, the placement {placement.users}")
    replicas = [frozenset(rs) for rs in placement.replicas]
    local = pairs = 0
    for u, row in enumerate(graph.friends):
        home = placement.home[u]
        pairs += len(row)
        local += sum(1 for f in row if home in replicas[f])
    return local / pairs if pairs else 1.0


def home_locality(graph: SocialGraph, placement: Placement) -> float:
    """The share of friendships whose two ends share a home region (what the partition optimises)."""
    same = sum(
        1 for u, row in enumerate(graph.friends) for f in row if placement.home[u] == placement.home[f]
    )
    ends = 2 * graph.edges
    return same / ends if ends else 1.0


def _nearest(topology: Topology, regions: tuple[str, ...]) -> list[dict[int, tuple[float, int]]]:
    """For each region, every region's sort key by closeness: (latency, topology index)."""
    return [
        {j: (topology.region_latency_ms(a, b) if a != b else -1.0, j) for j, b in enumerate(regions)}
        for a in regions
    ]


def _greedy_homes(
    friends: tuple[tuple[int, ...], ...], k: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    """Linear deterministic greedy in breadth-first order: each user goes where most of its placed
    friends are, weighted by the region's free room (capacity ceil(n/k)); ties to the emptiest."""
    n = len(friends)
    capacity = max(1, math.ceil(n / k))
    homes, size = [-1] * n, [0] * k
    starts = list(range(n))
    rng.shuffle(starts)
    seen = [False] * n
    for start in starts:
        if seen[start]:
            continue
        seen[start] = True
        queue = deque([start])
        while queue:
            u = queue.popleft()
            counts = [0] * k
            for f in friends[u]:
                h = homes[f]
                if h >= 0:
                    counts[h] += 1
                elif not seen[f]:
                    seen[f] = True
                    queue.append(f)
            best = max(
                (r for r in range(k) if size[r] < capacity),
                key=lambda r: (counts[r] * (1 - size[r] / capacity), -size[r], -r),
            )
            homes[u] = best
            size[best] += 1
    return homes, size


def _rebalance(friends: tuple[tuple[int, ...], ...], homes: list[int], size: list[int], low: int) -> None:
    """Fills any region below ``low`` from the fullest one, moving the users who mind least."""
    k = len(size)
    while min(size) < low:
        small = min(range(k), key=lambda r: (size[r], r))
        big = max(range(k), key=lambda r: (size[r], -r))

        def gain(u: int, small: int = small, big: int = big) -> int:
            return sum((homes[f] == small) - (homes[f] == big) for f in friends[u])

        mover = max((u for u in range(len(homes)) if homes[u] == big), key=lambda u: (gain(u), -u))
        homes[mover] = small
        size[big] -= 1
        size[small] += 1


def _refine(
    friends: tuple[tuple[int, ...], ...],
    homes: list[int],
    size: list[int],
    k: int,
    low: int,
    high: int,
    rng: random.Random,
) -> None:
    """Balanced label propagation: a user moves to the region holding most of its friends if the
    sizes allow, or swaps with a user waiting to go the other way if the pair gains; stops when a pass
    moves fewer than 0.1 % of the users."""
    n = len(friends)
    order = list(range(n))
    for _ in range(PASSES):
        rng.shuffle(order)
        moves = 0
        waiting: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(k)]
        for u in order:
            counts = [0] * k
            for f in friends[u]:
                counts[homes[f]] += 1
            current = best = homes[u]
            for r in range(k):
                if counts[r] > counts[best]:
                    best = r
            if best == current:
                continue
            gain = counts[best] - counts[current]
            if size[best] < high and size[current] > low:
                homes[u] = best
                size[best] += 1
                size[current] -= 1
                moves += 1
                continue
            if _swap(friends, homes, u, gain, waiting[best][current]):  # sizes unchanged
                moves += 2
            else:
                waiting[current][best].append(u)
        if moves <= n // 1000:
            break


def _swap(
    friends: tuple[tuple[int, ...], ...], homes: list[int], u: int, gain: int, queue: list[int]
) -> bool:
    """Swaps ``u`` (wanting to move by ``gain`` to the region of ``queue``'s users, who want to come
    to u's region) with the latest one still willing, if the pair gains; drops those no longer willing."""
    current = homes[u]
    while queue:
        v = queue.pop()
        there = homes[v]
        if there == current:
            continue  # moved since it queued
        gain_v = sum((homes[f] == current) - (homes[f] == there) for f in friends[v])
        if gain_v <= 0:
            continue
        row = friends[u]
        i = bisect_left(row, v)
        linked = i < len(row) and row[i] == v
        if gain + gain_v - 2 * linked <= 0:
            queue.append(v)
            return False
        homes[u], homes[v] = there, current
        return True
    return False


# -- the topology --------------------------------------------------------------------------------
def write_topology(
    base: Topology, placement: Placement, out_path: str | Path, name: str | None = None
) -> Path:
    """Writes ``base`` (every field, as TOML) plus the placement's groups to ``out_path``; the result
    loads with ``Topology.load``."""
    if tuple(base.region_names) != placement.regions:
        raise ValueError(
            f"the placement is over regions {list(placement.regions)}, the topology has {base.region_names}"
        )
    method = " ".join(placement.method.split())
    about = (
        f"the replication groups of a load-test placement\n"
        f"({placement.users:,} users, {len(placement.groups())} groups; {method})."
    )
    return topology_file.write_with_groups(
        base, placement.groups(), out_path, name or f"{base.name}-fb", about
    )
