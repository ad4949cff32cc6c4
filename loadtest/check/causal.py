"""Checks a recorded history for causal consistency: the bad patterns of Bouajjani, Enea,
Guerraoui and Hamza (POPL'17, "On verifying causal consistency") for differentiated histories.

Causal order ``co`` is ``(po | wr)+``: a session's order, and "w was read by r". A history is
causally consistent (CC) iff none of these occurs:

- ``ThinAirRead``: a read returns a value no write of that key wrote;
- ``CyclicCO``: ``co`` has a cycle (say, a session reads a value that is only written after, in
  causal order, the read);
- ``WriteCOInitRead``: a read returns the key's initial state although a write of that key is
  causally before the read;
- ``WriteCORead``: a read returns w's value although another write w' of the key has
  ``w co w' co r`` (the read missed a newer write it depends on: read-your-writes, monotonic
  reads and writes-follow-reads broken alike).

It scales by vector clocks over sessions rather than by the transitive closure: every operation
gets a vector (an int per session) in a topological order of ``po | wr`` (linear), and for a read
of key x, only the last write of x by each session inside the read's causal past can make it
stale (within a session, writes are ordered), found by binary search.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from loadtest.check.history import Key, Kind, Op, Outcome

PATTERNS = ("ThinAirRead", "CyclicCO", "WriteCOInitRead", "WriteCORead")
EXAMPLES_PER_PATTERN = 3
MAX_PATH = 8  # operations shown of a causal chain (its ends and what fits between)


@dataclass
class Violation:
    pattern: str
    read: Op | None  # the read that saw too little (None for a cycle)
    source: Op | None = None  # the write it read from (None: the initial state)
    newer: Op | None = None  # the write of the same key causally before the read and after source
    chain: list[Op] = field(default_factory=list)  # a causal chain that shows it (or the cycle)


@dataclass
class CheckResult:
    """Counts are of reads (ThinAirRead, WriteCOInitRead, WriteCORead) or of operations on or
    behind a cycle (CyclicCO)."""

    ops: int
    reads: int
    writes: int
    sessions: int
    counts: dict[str, int]
    examples: dict[str, list[Violation]]
    seconds: float

    @property
    def violations(self) -> int:
        return sum(self.counts.values())


class _Graph:
    """``po | wr`` over the operations that carry causality: acknowledged operations, and the
    writes of unknown outcome that somebody read."""

    def __init__(self, ops: list[Op]):
        self.ops = ops
        n = len(ops)
        self.preds: list[tuple[int, ...]] = [()] * n
        self.source: dict[int, int | None] = {}  # read id → write id (None: initial state)
        self.thin_air: list[int] = []
        writes: dict[str, Op] = {}
        for op in ops:
            if op.kind == Kind.WRITE:
                writes[op.value] = op  # type: ignore[index]
        read_unknown: set[int] = set()
        for op in ops:
            if op.kind == Kind.READ and op.outcome == Outcome.OK:
                if op.value is None:
                    self.source[op.id] = None
                    continue
                write = writes.get(op.value)
                if write is None or write.key != op.key:
                    self.thin_air.append(op.id)
                    continue
                self.source[op.id] = write.id
                if write.outcome == Outcome.UNKNOWN:
                    read_unknown.add(write.id)
        # Columns of the vector clocks: one per session, one per unknown write that was read.
        sessions = sorted({op.session for op in ops})
        self.column = {s: i for i, s in enumerate(sessions)}
        self.virtual = {w: len(sessions) + i for i, w in enumerate(sorted(read_unknown))}
        self.width = len(sessions) + len(self.virtual)
        # Session order: acknowledged ops chained by index; an unknown write hangs off the op
        # before it (the session never learned of it, so nothing of the session follows it).
        self.included = np.zeros(n, dtype=bool)
        last_ok: dict[tuple[int, int], int] = {}  # (session, index) → op id
        for op in ops:
            if op.outcome == Outcome.OK:  # a thin-air read too: it has no source, but a place
                last_ok[op.session, op.index] = op.id
                self.included[op.id] = True
        for w in read_unknown:
            self.included[w] = True
        for op in ops:
            if not self.included[op.id]:
                continue
            preds = []
            previous = last_ok.get((op.session, op.index - 1 if op.outcome == Outcome.OK else op.index))
            if previous is not None:
                preds.append(previous)
            source = self.source.get(op.id)
            if source is not None and self.included[source]:
                preds.append(source)
            self.preds[op.id] = tuple(preds)

    def topological(self) -> tuple[list[int], list[int]]:
        """Kahn's algorithm: the ops in an order where predecessors come first, and those left
        over (on or behind a cycle)."""
        n = len(self.ops)
        succs: list[list[int]] = [[] for _ in range(n)]
        indegree = np.zeros(n, dtype=np.int32)
        for node in range(n):
            if self.included[node]:
                for pred in self.preds[node]:
                    succs[pred].append(node)
                indegree[node] = len(self.preds[node])
        queue = deque(i for i in range(n) if self.included[i] and indegree[i] == 0)
        order = []
        while queue:
            node = queue.popleft()
            order.append(node)
            for nxt in succs[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    queue.append(nxt)
        done = np.zeros(n, dtype=bool)
        done[order] = True
        return order, [i for i in range(n) if self.included[i] and not done[i]]

    def own(self, op_id: int) -> tuple[int, int]:
        """(column, value) that marks ``op_id`` in a vector clock: x is causally before y iff
        vc[y][column(x)] >= value(x)."""
        if op_id in self.virtual:
            return self.virtual[op_id], 1
        op = self.ops[op_id]
        return self.column[op.session], op.index


def _vector_clocks(graph: _Graph, order: list[int]) -> np.ndarray:
    clocks = np.zeros((len(graph.ops), graph.width), dtype=np.int32)
    for node in order:
        row = clocks[node]
        for pred in graph.preds[node]:
            np.maximum(row, clocks[pred], out=row)
        column, value = graph.own(node)
        row[column] = value
    return clocks


@dataclass
class _KeyReads:
    """The reads of one key whose causal past is known, as arrays (one entry per read)."""

    reads: np.ndarray  # op ids
    sources: np.ndarray  # the write each read from, -1 for the initial state
    source_column: np.ndarray  # where the source marks vector clocks (see _Graph.own)
    source_value: np.ndarray

    @staticmethod
    def of(graph: _Graph, reads: list[int]) -> _KeyReads:
        sources = [graph.source[r] for r in reads]
        marks = [graph.own(s) if s is not None else (0, 0) for s in sources]
        return _KeyReads(
            np.array(reads),
            np.array([-1 if s is None else s for s in sources]),
            np.array([c for c, _ in marks]),
            np.array([v for _, v in marks]),
        )

    def stale(self, clocks: np.ndarray, candidates: np.ndarray, present: np.ndarray):
        """(pattern, read, source, newer) where a candidate write, present in the read's past, is
        not its source and is causally after it (or the read saw the initial state)."""
        has_source = self.sources >= 0
        after_source = clocks[candidates, self.source_column] >= self.source_value
        bad = present & (candidates != self.sources) & (~has_source | after_source)
        for i in np.flatnonzero(bad):
            source = int(self.sources[i]) if has_source[i] else None
            pattern = "WriteCORead" if has_source[i] else "WriteCOInitRead"
            yield pattern, int(self.reads[i]), source, int(candidates[i])


def _stale_reads(graph: _Graph, clocks: np.ndarray, computed: np.ndarray) -> list[tuple]:
    """(pattern, read, source, newer write) for every read that missed a newer write of its key."""
    reads_by_key: dict[Key, list[int]] = {}
    for read in graph.source:
        if computed[read]:
            reads_by_key.setdefault(graph.ops[read].key, []).append(read)
    ok_writes: dict[Key, dict[int, list[Op]]] = {}
    unknown_writes: dict[Key, list[int]] = {}
    for op in graph.ops:
        if op.kind != Kind.WRITE or not computed[op.id]:
            continue
        if op.outcome == Outcome.OK:
            ok_writes.setdefault(op.key, {}).setdefault(op.session, []).append(op)
        else:
            unknown_writes.setdefault(op.key, []).append(op.id)
    found = []
    for key, reads in reads_by_key.items():
        key_reads = _KeyReads.of(graph, reads)
        read_clocks = clocks[key_reads.reads]
        for session, writes in ok_writes.get(key, {}).items():
            indexes = np.array([w.index for w in writes])
            ids = np.array([w.id for w in writes])
            position = np.searchsorted(indexes, read_clocks[:, graph.column[session]], side="right") - 1
            found += key_reads.stale(clocks, ids[np.maximum(position, 0)], position >= 0)
        for write in unknown_writes.get(key, []):
            column, _ = graph.own(write)
            found += key_reads.stale(clocks, np.full(len(reads), write), read_clocks[:, column] >= 1)
    return found


def _chain(graph: _Graph, clocks: np.ndarray, start: int, end: int) -> list[Op]:
    """A shortest causal chain from ``start`` to ``end`` (both included), shortened for a report."""
    column, value = graph.own(start)
    parent: dict[int, int | None] = {end: None}
    queue = deque([end])
    while queue:
        node = queue.popleft()
        if node == start:
            break
        for pred in graph.preds[node]:
            if pred not in parent and clocks[pred][column] >= value:
                parent[pred] = node
                queue.append(pred)
    path, node = [], start if start in parent else None
    while node is not None:
        path.append(graph.ops[node])
        node = parent[node]
    if len(path) > MAX_PATH:
        path = path[: MAX_PATH // 2] + path[-(MAX_PATH // 2) :]
    return path


def _a_cycle(graph: _Graph, left: list[int]) -> list[Op]:
    """One cycle among the ops Kahn's algorithm could not order (following predecessors)."""
    remaining = set(left)
    node = left[0]
    seen: dict[int, int] = {}
    walk: list[int] = []
    while node not in seen:
        seen[node] = len(walk)
        walk.append(node)
        node = next(p for p in graph.preds[node] if p in remaining)
    cycle = walk[seen[node] :]
    cycle.reverse()  # in causal order
    return [graph.ops[i] for i in cycle][: MAX_PATH * 2]


def check(ops: list[Op]) -> CheckResult:
    """Every bad pattern in ``ops``, counted, with a few examples of each."""
    began = time.perf_counter()
    graph = _Graph(ops)
    order, left = graph.topological()
    computed = np.zeros(len(ops), dtype=bool)
    computed[order] = True
    clocks = _vector_clocks(graph, order)
    counts = dict.fromkeys(PATTERNS, 0)
    examples: dict[str, list[Violation]] = {p: [] for p in PATTERNS}
    counts["ThinAirRead"] = len(graph.thin_air)
    thin_air = graph.thin_air[:EXAMPLES_PER_PATTERN]
    examples["ThinAirRead"] = [Violation("ThinAirRead", ops[i]) for i in thin_air]
    if left:
        counts["CyclicCO"] = len(left)  # operations on or behind a cycle
        examples["CyclicCO"] = [Violation("CyclicCO", None, chain=_a_cycle(graph, left))]
    flagged: set[int] = set()  # a read counts once, however many newer writes it missed
    for pattern, read, source, newer in _stale_reads(graph, clocks, computed):
        if read in flagged:
            continue
        flagged.add(read)
        counts[pattern] += 1
        if len(examples[pattern]) < EXAMPLES_PER_PATTERN:
            chain = _chain(graph, clocks, newer, read)
            examples[pattern].append(
                Violation(pattern, ops[read], None if source is None else ops[source], ops[newer], chain)
            )
    return CheckResult(
        ops=len(ops),
        reads=sum(op.kind == Kind.READ for op in ops),
        writes=sum(op.kind == Kind.WRITE for op in ops),
        sessions=len(graph.column),
        counts=counts,
        examples=examples,
        seconds=time.perf_counter() - began,
    )
