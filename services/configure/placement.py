"""One shape's best placement: the SOLVE of Algorithm 3 (paper §5.4-§5.5).

For a given tree shape it chooses where each serializer runs (one of the candidate sites) and
each edge's artificial delay, minimising the weighted global mismatch of Definition 2,
sum over region pairs of c_ij * |path_ij - bulk_ij|, where a label's path is the sum of its
edges' latencies (between their sites) and delays. This is a mixed-integer linear program, solved
exactly by HiGHS through SciPy (`scipy.optimize.milp`): the paper used a constraint solver;
OR-Tools' CP-SAT would do too, but its wheels pin a protobuf older than gRPC's here.

Variables: x[n, s] = 1 when serializer n runs at site s (binary); y[e, s, t] for an edge between
two serializers, the product x[u, s] * x[v, t] (continuous: its row and column sums are tied to
two one-hot vectors, which leaves one solution, integral); the delay of every edge (>= 0); and
the mismatch of every pair (>= both path - bulk and bulk - path). Delays are the same both ways
on an edge, as the topology's ``delay_ms`` is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from services.configure.shapes import Tree


@dataclass(frozen=True)
class Instance:
    """What the generator is given: regions at sites, where serializers may run, one-way
    latencies between sites, and how much each pair of regions matters."""

    region_sites: dict[str, str]
    candidates: list[str]
    latency: Callable[[str, str], float]  # one-way ms between two sites (0 within a site)
    weights: dict[frozenset[str], float]  # a pair of regions -> c_ij

    def bulk_ms(self, a: str, b: str) -> float:
        return self.latency(self.region_sites[a], self.region_sites[b])


@dataclass(frozen=True)
class Placement:
    tree: Tree
    sites: dict[int, str]  # serializer (internal node) -> its site
    delays: list[float]  # per edge of tree.edges, ms
    weighted_mismatch: float  # the objective: sum of c_ij * |path - bulk|
    mean_mismatch: float  # the same divided by the sum of the weights (ms)

    def site(self, node: int | str, instance: Instance) -> str:
        return self.sites[node] if isinstance(node, int) else instance.region_sites[node]

    def edge_ms(self, k: int, instance: Instance) -> float:
        u, v = self.tree.edges[k]
        return instance.latency(self.site(u, instance), self.site(v, instance)) + self.delays[k]

    def path_ms(self, a: str, b: str, instance: Instance) -> float:
        return sum(self.edge_ms(k, instance) for k in self.tree.path(a, b))


class _Columns:
    """Column indices of the program's variables, allocated in order."""

    def __init__(self) -> None:
        self.count = 0

    def take(self, n: int) -> range:
        taken = range(self.count, self.count + n)
        self.count += n
        return taken


def place(tree: Tree, instance: Instance, time_limit_s: float = 60.0) -> Placement:
    """The optimal sites and delays for ``tree`` (exact, within ``time_limit_s``)."""
    sites = instance.candidates
    regions = tree.regions
    pairs = [frozenset(p) for p in itertools.combinations(regions, 2)]
    cols = _Columns()
    x = {n: dict(zip(sites, cols.take(len(sites)), strict=True)) for n in tree.internal}
    inner = [k for k, (u, v) in enumerate(tree.edges) if isinstance(v, int)]
    y = {
        k: dict(zip(itertools.product(sites, sites), cols.take(len(sites) ** 2), strict=True)) for k in inner
    }
    delay = list(cols.take(len(tree.edges)))
    mismatch = dict(zip(pairs, cols.take(len(pairs)), strict=True))

    def edge_latency(k: int) -> dict[int, float]:
        """The latency of edge k as coefficients of the site variables."""
        u, v = tree.edges[k]
        if k in y:
            return {col: instance.latency(s, t) for (s, t), col in y[k].items()}
        assert isinstance(u, int) and isinstance(v, str)  # not in y: from a serializer to a region
        region_site = instance.region_sites[v]
        return {col: instance.latency(region_site, s) for s, col in x[u].items()}

    rows: list[tuple[dict[int, float], float, float]] = []  # (coefficients, lower, upper)
    for n in tree.internal:
        rows.append(({col: 1.0 for col in x[n].values()}, 1.0, 1.0))
    for k in inner:
        u, v = tree.edges[k]
        assert isinstance(u, int) and isinstance(v, int)  # inner: between two serializers
        for s in sites:  # row and column sums of y tie it to the two one-hot site vectors
            rows.append(({**{y[k][s, t]: 1.0 for t in sites}, x[u][s]: -1.0}, 0.0, 0.0))
            rows.append(({**{y[k][t, s]: 1.0 for t in sites}, x[v][s]: -1.0}, 0.0, 0.0))
    for pair in pairs:
        a, b = sorted(pair)
        path: dict[int, float] = {}
        for k in tree.path(a, b):
            for col, coef in edge_latency(k).items():
                path[col] = path.get(col, 0.0) + coef
            path[delay[k]] = path.get(delay[k], 0.0) + 1.0
        bulk = instance.bulk_ms(a, b)
        over = {col: -coef for col, coef in path.items()} | {mismatch[pair]: 1.0}
        under = dict(path) | {mismatch[pair]: 1.0}
        rows.append((over, -bulk, np.inf))  # mismatch >= path - bulk
        rows.append((under, bulk, np.inf))  # mismatch >= bulk - path

    matrix = np.zeros((len(rows), cols.count))
    for r, (coefficients, _, _) in enumerate(rows):
        for col, coef in coefficients.items():
            matrix[r, col] = coef
    weights = {pair: instance.weights.get(pair, 0.0) for pair in pairs}
    cost = np.zeros(cols.count)
    for pair, col in mismatch.items():
        cost[col] = weights[pair]
    integrality = np.zeros(cols.count)
    for by_site in x.values():
        integrality[list(by_site.values())] = 1
    longest = max((instance.bulk_ms(a, b) for a, b in itertools.combinations(regions, 2)), default=0.0)
    upper = np.full(cols.count, np.inf)
    bounded: list[dict[str, int] | dict[tuple[str, str], int]] = [*x.values(), *y.values()]
    for columns in bounded:
        upper[list(columns.values())] = 1.0
    upper[delay] = longest  # a delay beyond the longest link can only add mismatch
    with _native_stdout_silenced():
        result = milp(
            cost,
            constraints=LinearConstraint(matrix, [r[1] for r in rows], [r[2] for r in rows]),
            integrality=integrality,
            bounds=Bounds(np.zeros(cols.count), upper),
            options={"time_limit": time_limit_s},
        )
    if result.x is None:
        raise RuntimeError(f"the solver found no placement ({result.message})")
    values = result.x
    chosen = {n: max(by_site, key=lambda s: values[by_site[s]]) for n, by_site in x.items()}
    delays = [round(float(values[col]), 3) for col in delay]
    total_weight = sum(weights.values()) or 1.0
    return Placement(tree, chosen, delays, float(result.fun), float(result.fun) / total_weight)


@contextlib.contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """HiGHS now and then prints a debug line of its own to the process's stdout whatever its
    options say (a known HiGHS issue: "transformNewIntegerFeasibleSolution"); it is hidden."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
