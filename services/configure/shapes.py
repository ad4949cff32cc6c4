"""Tree shapes for the configuration generator (paper §5.5, Algorithm 3): rooted full binary
trees whose leaves are regions, grown one region at a time.

A shape is a region name (a leaf) or a pair of shapes (an internal node: a serializer). Growing a
shape of f leaves by one region gives its 2f - 1 successors: the region hung from a new root
above the whole shape (Alg. 3, line 10), or from a new internal node inserted on any edge
(line 14).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

Shape = str | tuple["Shape", "Shape"]


def grow(shape: Shape, region: str) -> list[Shape]:
    """Every shape with ``region`` added (the new root first, then one per edge)."""
    return [(shape, region), *_inserted(shape, region)]


def _inserted(shape: Shape, region: str) -> list[Shape]:
    """``region`` hung from a new node on each edge below the top of ``shape``."""
    if isinstance(shape, str):
        return []
    left, right = shape
    grown: list[Shape] = [((left, region), right), (left, (right, region))]
    grown += [(new, right) for new in _inserted(left, region)]
    grown += [(left, new) for new in _inserted(right, region)]
    return grown


def describe(shape: Shape) -> str:
    return shape if isinstance(shape, str) else f"({describe(shape[0])} {describe(shape[1])})"


@dataclass(frozen=True)
class Tree:
    """A shape as nodes and edges: leaves are region names, internal nodes 0, 1, ... (root 0)."""

    shape: Shape

    @cached_property
    def _layout(self) -> tuple[list[tuple[int | str, int | str]], dict[int | str, int | str]]:
        edges: list[tuple[int | str, int | str]] = []
        parent: dict[int | str, int | str] = {}
        counter = [0]

        def visit(node: Shape) -> int | str:
            if isinstance(node, str):
                return node
            me = counter[0]
            counter[0] += 1
            for child in node:
                name = visit(child)
                edges.append((me, name))
                parent[name] = me
            return me

        visit(self.shape)
        return edges, parent

    @property
    def edges(self) -> list[tuple[int | str, int | str]]:
        """(parent, child) for every edge."""
        return self._layout[0]

    @property
    def internal(self) -> list[int]:
        return sorted({p for p, _ in self.edges if isinstance(p, int)})

    @property
    def regions(self) -> list[str]:
        return [c for _, c in self.edges if isinstance(c, str)]

    def path(self, a: str, b: str) -> list[int]:
        """The indices (into ``edges``) of the edges on the path between regions a and b."""
        parent = self._layout[1]
        index = {child: k for k, (_, child) in enumerate(self.edges)}

        def up(node: int | str) -> list[int | str]:
            chain = [node]
            while chain[-1] in parent:
                chain.append(parent[chain[-1]])
            return chain

        above_a, above_b = up(a), up(b)
        common = next(n for n in above_a if n in set(above_b))
        return [index[n] for n in above_a[: above_a.index(common)]] + [
            index[n] for n in above_b[: above_b.index(common)]
        ]
