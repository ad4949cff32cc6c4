"""Algorithm 3 of the paper (§5.5): grow tree shapes one region at a time, rank each by its
optimal placement, keep the promising ones.

Starting from the two first regions, every kept shape is grown by the next region in all 2f - 1
ways and each is placed (placement.py). The ranked list is cut where two consecutive shapes'
mean mismatch differ by more than ``threshold_ms`` (the paper's rule) and, so that the search
stays bounded, after ``beam`` shapes. With ``threshold_ms`` and ``beam`` unbounded the search is
exhaustive: (2N-3)!! shapes, 10,395 for seven regions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from services.configure.placement import Instance, Placement, place
from services.configure.shapes import Tree, grow


@dataclass
class Search:
    best: Placement
    placed: int  # shapes placed (solver calls)
    kept_per_round: list[int]


def find_configuration(
    instance: Instance,
    order: list[str],
    threshold_ms: float = 2.0,
    beam: int = 8,
    progress: Callable[[str], None] | None = None,
) -> Search:
    if len(order) < 2:
        raise ValueError("a tree needs at least two regions")
    placed = 0
    kept: list[Placement] = [place(Tree((order[0], order[1])), instance)]
    rounds: list[int] = [1]
    for region in order[2:]:
        grown: list[Placement] = []
        for placement in kept:
            for shape in grow(placement.tree.shape, region):
                grown.append(place(Tree(shape), instance))
        placed += len(grown)
        grown.sort(key=lambda p: p.mean_mismatch)
        kept = grown[:1]
        for previous, candidate in itertools.pairwise(grown):
            if candidate.mean_mismatch - previous.mean_mismatch > threshold_ms or len(kept) >= beam:
                break
            kept.append(candidate)
        rounds.append(len(kept))
        if progress:
            progress(
                f"  {len(placement.tree.regions) + 1} regions: {len(grown)} shapes placed, "
                f"{len(kept)} kept, best mean mismatch {kept[0].mean_mismatch:.2f} ms"
            )
    return Search(kept[0], placed + 1, rounds)
