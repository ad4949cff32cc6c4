"""The load test's social graph: a synthetic stand-in for the New Orleans Facebook network.

Saturn's §7.4 drives its benchmark with the New Orleans Facebook graph of Viswanath et al.
(WOSN'09): 61,096 users and 905,565 friendships, so an average degree of 29.64, with the two
features that matter to a geo-replicated store: a heavy-tailed degree distribution (a few users
have hundreds of friends, most have a handful to a few dozen) and clustering (friends of friends are
friends, average clustering about 0.22), which is what lets a partitioner keep friends together.

We do not ship the data set; :func:`generate` grows a graph of that shape with the
friends-of-friends model of Toivonen et al. ("A model for social networks", Physica A 2006; the
same mechanism as Jackson & Rogers, "Meeting strangers and friends of friends", AER 2007).
Users arrive one at a time; a newcomer makes ``k`` friendships, ``k`` drawn from a lognormal
distribution whose mean is half the average degree (so the graph has exactly
``round(users * average_degree / 2)`` edges); a quarter of them (at least one) are strangers chosen
uniformly, the rest are friends of those strangers (a random neighbour of a random first contact).
Why this model and not networkx's Holme-Kim ``powerlaw_cluster_graph`` (m = 15), measured on
the same machine: its clustering decays with size (0.17 at 2,000 users even with triangle
probability 0.9; 0.075 at 61,096 users with 0.6), its degrees are a pure power law with a minimum
of 15 (nobody has fewer than 15 friends) and a maximum of 4,589 (155 times the mean) at full
size, and it takes 47 s there. The friends-of-friends model keeps clustering at the Facebook
level at every size (triangles are made locally); meeting friends of friends is preferential
attachment in disguise (a random neighbour is picked in proportion to degree), so the tail is
heavy without being extreme; and newcomers making few friendships give the many low-degree users
of a real network. It is written here in plain Python (2 s at full size).
Every user has at least one friend (each newcomer links to an earlier user: the graph is
connected), and user ids are a seeded shuffle of arrival order, so an id says nothing of a
user's age or degree.

Measured (``generate(n)``, seed 1, one core of a shared 2-core machine; clustering exact at
2,000 users, over a seeded sample of 2,000 at 61,096):

=======  ======  =======  =====  ===  ======  ===  ===  =====  ========  ======  ==========
users    time    edges    mean   min  median  p90  p99  max    max/mean  top 1%  clustering
=======  ======  =======  =====  ===  ======  ===  ===  =====  ========  ======  ==========
2,000    0.05 s  29,644   29.64  1    18      68   170  270    9.1       6.8 %   0.283
61,096   2.0 s   905,565  29.64  1    18      64   185  822    27.7      9.2 %   0.227
=======  ======  =======  =====  ===  ======  ===  ===  =====  ========  ======  ==========

("top 1 %": the share of friendship ends held by the best-connected 1 % of users.) The full-size
file is 2.3 MB and saves or loads in under a second.

File format (:meth:`SocialGraph.save`, conventionally ``graph.txt.gz``): gzip'd UTF-8 text,
written with a zero gzip timestamp so that the same graph gives the same bytes. The first line is
``saturn-social-graph 1 users=<n> edges=<m> seed=<seed> model=<one-line description>``; then
exactly ``n`` lines, line ``u`` (0-based after the header) listing, space-separated and ascending,
the friends of user ``u`` whose id is greater than ``u`` (possibly none: an empty line). Each
friendship therefore appears once, on the line of its lower-id end.
"""

from __future__ import annotations

import gzip
import math
import random
import statistics as stats
import zlib
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

NEW_ORLEANS_USERS = 61_096
NEW_ORLEANS_EDGES = 905_565
NEW_ORLEANS_AVERAGE_DEGREE = 2 * NEW_ORLEANS_EDGES / NEW_ORLEANS_USERS  # 29.64
RANDOM_SHARE = 0.25  # of a newcomer's friendships, those made with strangers (the rest: their friends)
SPREAD = 1.0  # sigma of the lognormal number of friendships a newcomer makes
MIN_USERS = 3
CLUSTERING_SAMPLE = 2_000
FORMAT = "saturn-social-graph"
VERSION = 1


@dataclass(frozen=True)
class SocialGraph:
    """An undirected friendship graph over users ``0 .. users-1``; ``friends[u]`` is sorted."""

    friends: tuple[tuple[int, ...], ...]
    seed: int
    model: str

    @property
    def users(self) -> int:
        return len(self.friends)

    @cached_property
    def edges(self) -> int:
        return sum(len(f) for f in self.friends) // 2

    def degree(self, user: int) -> int:
        return len(self.friends[user])

    def are_friends(self, a: int, b: int) -> bool:
        row = self.friends[a]
        i = bisect_right(row, b)
        return i > 0 and row[i - 1] == b

    # -- the file ----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Writes the graph (format in the module docstring); the same graph gives the same bytes."""
        path = Path(path)
        if "\n" in self.model or "\r" in self.model:
            raise ValueError("the model description must be one line")
        lines = [
            f"{FORMAT} {VERSION} users={self.users} edges={self.edges} seed={self.seed} model={self.model}"
        ]
        for u, row in enumerate(self.friends):
            lines.append(" ".join(map(str, row[bisect_right(row, u) :])))
        data = ("\n".join(lines) + "\n").encode()
        path.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
        return path

    @classmethod
    def load(cls, path: str | Path) -> SocialGraph:
        """Reads a file written by :meth:`save`; a damaged one raises ValueError naming the file."""
        path = Path(path)
        try:
            text = gzip.decompress(path.read_bytes()).decode()
        except FileNotFoundError as exc:
            raise ValueError(f"{path}: no such graph file") from exc
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: not a gzip'd graph file ({exc})") from exc
        try:
            return _parse(text)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def _parse(text: str) -> SocialGraph:
    lines = text.split("\n")
    if not lines[-1]:
        lines.pop()
    if not lines:
        raise ValueError("empty file")
    header = lines[0]
    head, sep, model = header.partition(" model=")
    fields = head.split(" ")
    if not sep or len(fields) != 5 or fields[0] != FORMAT:
        raise ValueError(f"not a {FORMAT} file (header {header[:80]!r})")
    if fields[1] != str(VERSION):
        raise ValueError(f"format version {fields[1]!r}, expected {VERSION}")
    values: dict[str, int] = {}
    for field, key in zip(fields[2:], ("users", "edges", "seed"), strict=True):
        name, _, value = field.partition("=")
        if name != key:
            raise ValueError(f"header: expected {key}=..., got {field!r}")
        try:
            values[key] = int(value)
        except ValueError:
            raise ValueError(f"header: {key} is not an integer: {value!r}") from None
    users = values["users"]
    if users < 0 or len(lines) - 1 != users:
        raise ValueError(f"header says {users} users, the file has {len(lines) - 1} user lines (truncated?)")
    neighbours: list[list[int]] = [[] for _ in range(users)]
    edges = 0
    for u in range(users):
        line = lines[u + 1]
        if not line:
            continue
        try:
            row = [int(x) for x in line.split(" ")]
        except ValueError:
            raise ValueError(f"user {u}: not a list of user ids: {line[:80]!r}") from None
        previous = u
        for v in row:
            if v <= previous or v >= users:
                raise ValueError(
                    f"user {u}: friend {v} out of order or out of range (ids {u + 1}..{users - 1})"
                )
            previous = v
            neighbours[v].append(u)
        neighbours[u].extend(row)
        edges += len(row)
    if edges != values["edges"]:
        raise ValueError(f"header says {values['edges']} friendships, the file lists {edges}")
    return SocialGraph(tuple(tuple(sorted(row)) for row in neighbours), values["seed"], model)


# -- the generator -------------------------------------------------------------------------------
def default_average_degree(users: int) -> float:
    """The New Orleans average degree, capped at (users-1)/2 (but at least 2) for a tiny graph."""
    return min(NEW_ORLEANS_AVERAGE_DEGREE, max(2.0, (users - 1) / 2))


def generate(
    users: int,
    seed: int = 1,
    average_degree: float | None = None,
    random_share: float = RANDOM_SHARE,
    spread: float = SPREAD,
) -> SocialGraph:
    """A Facebook-like graph (model in the module docstring); same arguments, same graph.

    ``average_degree`` defaults to New Orleans' 29.64 (capped for tiny graphs); the graph has
    exactly ``round(users * average_degree / 2)`` friendships. ``random_share`` is the share of a
    newcomer's friendships made with strangers (lower: more clustering and a heavier tail);
    ``spread`` the sigma of the lognormal number of friendships a newcomer makes (0: all equal).
    """
    if not isinstance(users, int) or users < MIN_USERS:
        raise ValueError(f"users must be an integer >= {MIN_USERS}, got {users!r}")
    degree = default_average_degree(users) if average_degree is None else float(average_degree)
    if not 2 <= degree <= users - 1 or math.isnan(degree):
        raise ValueError(
            f"average_degree must be between 2 (everyone has a friend) and users-1 = {users - 1}, "
            f"got {degree}"
        )
    if not 0 <= random_share <= 1:
        raise ValueError(f"random_share must be in [0, 1], got {random_share}")
    if not 0 <= spread <= 3:
        raise ValueError(f"spread must be in [0, 3], got {spread}")
    rng = random.Random(f"social-graph/{seed}")
    target = round(users * degree / 2)
    core = min(users, max(2, round(degree / 2) + 1))  # a small clique to grow from
    wanted = _newcomer_degrees(rng, users, core, target - core * (core - 1) // 2, degree / 2, spread)

    adjacency: list[list[int]] = [[v for v in range(core) if v != u] for u in range(core)]
    adjacency.extend([] for _ in range(core, users))
    for u in range(core, users):
        k = wanted[u - core]
        mine: set[int] = set()
        first = _pick_uniform(rng, u, mine, min(k, max(1, round(k * random_share))))
        need, tries = k - len(first), 0
        while need and tries < 20 * k:
            tries += 1
            v = rng.choice(adjacency[rng.choice(first)])
            if v not in mine:
                mine.add(v)
                need -= 1
        if need:
            _pick_uniform(rng, u, mine, need)
        row = sorted(mine)
        for v in row:
            adjacency[v].append(u)
        adjacency[u] = row

    order = list(range(users))
    rng.shuffle(order)  # ids say nothing of arrival order
    friends: list[tuple[int, ...]] = [()] * users
    for old, row in enumerate(adjacency):
        friends[order[old]] = tuple(sorted(order[v] for v in row))
    model = (
        f"friends-of-friends growth (Toivonen et al. 2006): {users} users, average degree {degree:.2f}, "
        f"{random_share:.0%} strangers, lognormal(sigma={spread:g}) friendships per newcomer"
    )
    return SocialGraph(tuple(friends), seed, model)


def _newcomer_degrees(
    rng: random.Random, users: int, core: int, total: int, mean: float, spread: float
) -> list[int]:
    """How many friendships each newcomer makes: lognormal around ``mean``, at least 1, at most the
    number of users already there, adjusted one by one so that they sum to exactly ``total``."""
    count = users - core
    low, high = count, sum(range(core, users))
    if not low <= total <= high:
        raise ValueError(f"cannot make {total} friendships among {users} users with this average degree")
    mu = math.log(mean) - spread**2 / 2
    wanted = [min(core + i, max(1, round(rng.lognormvariate(mu, spread)))) for i in range(count)]
    missing = total - sum(wanted)
    step = 1 if missing > 0 else -1
    while missing:
        i = rng.randrange(count)
        new = wanted[i] + step
        if 1 <= new <= core + i:
            wanted[i] = new
            missing -= step
    return wanted


def _pick_uniform(rng: random.Random, below: int, chosen: set[int], count: int) -> list[int]:
    """Adds ``count`` users drawn uniformly from ``0 .. below-1`` and not yet in ``chosen``."""
    free = below - len(chosen)
    if count > free:
        raise ValueError(f"cannot pick {count} of {free} users")
    if 2 * count >= free:
        picked = rng.sample([v for v in range(below) if v not in chosen], count)
        chosen.update(picked)
        return picked
    picked = []
    while len(picked) < count:
        v = rng.randrange(below)
        if v not in chosen:
            chosen.add(v)
            picked.append(v)
    return picked


# -- statistics ----------------------------------------------------------------------------------
@dataclass
class GraphStats:
    """What shows that a graph looks like a social network: degree spread, tail and clustering."""

    users: int
    edges: int
    mean_degree: float
    min_degree: int
    median_degree: float
    p90_degree: int
    p99_degree: int
    max_degree: int
    max_over_mean: float  # heavy tail: a Facebook-like graph has tens; a random graph about 2
    top1_share: float  # share of friendship ends held by the best-connected 1 % of users
    clustering: float  # average local clustering coefficient
    clustering_users: int  # over how many users it was measured (all of them: exact)
    random_clustering: float  # what a random graph of the same density would have

    def lines(self) -> list[str]:
        how = (
            "exact"
            if self.clustering_users == self.users
            else f"sampled over {self.clustering_users:,} users"
        )
        top = max(1, self.users // 100)
        return [
            f"users {self.users:,}, friendships {self.edges:,} (average degree {self.mean_degree:.2f})",
            f"degree: min {self.min_degree}, median {self.median_degree:g}, p90 {self.p90_degree}, "
            f"p99 {self.p99_degree}, max {self.max_degree:,} (max/mean {self.max_over_mean:.1f})",
            f"top 1% of users ({top:,}) hold {self.top1_share:.1%} of friendship ends",
            f"average clustering {self.clustering:.3f} ({how}; a random graph as dense: "
            f"{self.random_clustering:.4f})",
        ]


def statistics(graph: SocialGraph, sample: int | None = CLUSTERING_SAMPLE, seed: int = 0) -> GraphStats:
    """The graph's :class:`GraphStats`; clustering is exact when ``sample`` is None or at least the
    number of users, otherwise averaged over ``sample`` users drawn with ``seed``."""
    n = graph.users
    if n == 0:
        raise ValueError("an empty graph has no statistics")
    if sample is not None and sample < 1:
        raise ValueError(f"sample must be >= 1 or None, got {sample}")
    degrees = sorted(len(row) for row in graph.friends)
    ends = sum(degrees)
    mean = ends / n
    top = max(1, n // 100)
    if sample is None or sample >= n:
        measured: list[int] | range = range(n)
    else:
        measured = random.Random(f"clustering/{seed}").sample(range(n), sample)
    clustering = sum(local_clustering(graph, u) for u in measured) / len(measured)
    return GraphStats(
        users=n,
        edges=ends // 2,
        mean_degree=mean,
        min_degree=degrees[0],
        median_degree=stats.median(degrees),
        p90_degree=_percentile(degrees, 0.90),
        p99_degree=_percentile(degrees, 0.99),
        max_degree=degrees[-1],
        max_over_mean=degrees[-1] / mean if mean else 0.0,
        top1_share=sum(degrees[-top:]) / ends if ends else 0.0,
        clustering=clustering,
        clustering_users=len(measured),
        random_clustering=ends / (n * (n - 1)) if n > 1 else 0.0,
    )


def local_clustering(graph: SocialGraph, user: int) -> float:
    """The share of the user's pairs of friends who are friends themselves (0 below 2 friends)."""
    row = graph.friends[user]
    k = len(row)
    if k < 2:
        return 0.0
    mine = set(row)
    links = sum(len(mine.intersection(graph.friends[v])) for v in row)  # each triangle twice
    return links / (k * (k - 1))


def _percentile(ordered: list[int], q: float) -> int:
    """Nearest-rank percentile of an ascending list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
