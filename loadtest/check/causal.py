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

import gc
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
    writes of unknown outcome that somebody read. Each has at most two predecessors, kept as two
    lists: the session's previous operation (``prev``) and, for a read, the write it read from
    (``src``); -1 for none. What the stale-read search needs per operation is kept as arrays."""

    def __init__(self, ops: list[Op]):
        self.ops = ops
        n = len(ops)
        ok, read, write = Outcome.OK, Kind.READ, Kind.WRITE
        writes = {op.value: op for op in ops if op.kind is write}
        self.source: dict[int, int | None] = {}  # read id → write id (None: initial state)
        self.thin_air: list[int] = []
        read_unknown: set[int] = set()
        for op in ops:
            if op.kind is read and op.outcome is ok:
                if op.value is None:
                    self.source[op.id] = None
                    continue
                found = writes.get(op.value)
                if found is None or found.key != op.key:
                    self.thin_air.append(op.id)
                    continue
                self.source[op.id] = found.id
                if found.outcome is not ok:
                    read_unknown.add(found.id)
        # Columns of the vector clocks: one per session, one per unknown write that was read.
        sessions = sorted({op.session for op in ops})
        self.column = {s: i for i, s in enumerate(sessions)}
        self.virtual = {w: len(sessions) + i for i, w in enumerate(sorted(read_unknown))}
        self.width = len(sessions) + len(self.virtual)
        # Session order: acknowledged ops chained by index; an unknown write hangs off the op
        # before it (the session never learned of it, so nothing of the session follows it).
        acknowledged = [op.outcome is ok for op in ops]
        last_ok = {(op.session, op.index): op.id for op in ops if op.outcome is ok}
        included = acknowledged.copy()  # a thin-air read too: no source, but a place
        for w in read_unknown:
            included[w] = True
        self.included = np.array(included, dtype=bool)
        self.acknowledged = np.array(acknowledged, dtype=bool)
        prev = [-1] * n
        src = [-1] * n
        source = self.source
        for op in ops:
            if not included[op.id]:
                continue
            before = last_ok.get((op.session, op.index - 1 if op.outcome is ok else op.index))
            if before is not None:
                prev[op.id] = before
            read_from = source.get(op.id)
            if read_from is not None and included[read_from]:
                src[op.id] = read_from
        self.prev, self.src = prev, src
        # Where each op marks a vector clock (see own).
        column = self.column
        self.mark_column = [column[op.session] for op in ops]
        self.mark_value = [op.index for op in ops]
        for w, virtual in self.virtual.items():
            self.mark_column[w], self.mark_value[w] = virtual, 1
        keys: dict[Key, int] = {}
        self.key = np.array([keys.setdefault(op.key, len(keys)) for op in ops], dtype=np.int64)
        self.is_write = np.array([op.kind is write for op in ops], dtype=bool)

    def preds(self, node: int) -> tuple[int, ...]:
        return tuple(p for p in (self.prev[node], self.src[node]) if p >= 0)

    def topological(self) -> tuple[list[int], list[int]]:
        """The ops in an order where predecessors come first, and those left over (on or behind
        a cycle). Ids are the order the recorder took the ops in, which is such an order but
        where a read was recorded before the write it read from (their threads raced to the
        recorder): then Kahn's algorithm."""
        n = len(self.ops)
        ids = np.arange(n)
        if np.all(~self.included | ((np.array(self.prev) < ids) & (np.array(self.src) < ids))):
            return np.flatnonzero(self.included).tolist(), []
        prev, src, included = self.prev, self.src, self.included.tolist()
        succs: list[list[int]] = [[] for _ in range(n)]
        indegree = [0] * n
        for node in range(n):
            if included[node]:
                for pred in (prev[node], src[node]):
                    if pred >= 0:
                        succs[pred].append(node)
                        indegree[node] += 1
        order = [i for i in range(n) if included[i] and indegree[i] == 0]
        for node in order:  # grows as it goes: a queue read in place
            for nxt in succs[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    order.append(nxt)
        done = np.zeros(n, dtype=bool)
        done[order] = True
        return order, [i for i in range(n) if included[i] and not done[i]]

    def own(self, op_id: int) -> tuple[int, int]:
        """(column, value) that marks ``op_id`` in a vector clock: x is causally before y iff
        vc[y][column(x)] >= value(x)."""
        return self.mark_column[op_id], self.mark_value[op_id]


def _vector_clocks(graph: _Graph, order: list[int]) -> np.ndarray:
    """Every op's vector clock, one row each. Along a session the clock changes only in the
    session's own column until a read from another session joins in a second clock; so a row is
    kept as a shared array without the op's own mark (set at the end, in one step), and a new
    array is made only at such a join."""
    n = len(graph.ops)
    zero = np.zeros(graph.width, dtype=np.int32)
    rows: list[np.ndarray] = [zero] * n
    prev, src = graph.prev, graph.src
    columns, values = graph.mark_column, graph.mark_value
    for node in order:
        p, s = prev[node], src[node]
        base = rows[p] if p >= 0 else zero
        same_column = p < 0 or columns[p] == columns[node]  # not so for an unknown write's
        if same_column and (s < 0 or (columns[s] == columns[node] and values[s] <= values[node])):
            rows[node] = base  # (a read of one's own earlier write: it is in the session's past)
            continue
        joined = np.maximum(base, rows[s]) if s >= 0 else base.copy()
        if not same_column and joined[columns[p]] < values[p]:
            joined[columns[p]] = values[p]
        if s >= 0 and joined[columns[s]] < values[s]:
            joined[columns[s]] = values[s]
        rows[node] = joined
    clocks = np.array(rows, dtype=np.int32).reshape(n, graph.width)
    marked = np.array(order, dtype=np.int64)
    if len(marked):
        clocks[marked, np.array(columns)[marked]] = np.array(values)[marked]
    return clocks


def _stale_reads(graph: _Graph, clocks: np.ndarray, computed: np.ndarray) -> list[tuple]:
    """(pattern, read, source, newer write) for every read that missed a newer write of its key.

    For a read of key x, only the last write of x by each session inside the read's causal past
    can make it stale (within a session, writes are ordered). All reads at once, a session at a
    time: the acknowledged writes sorted by (key, session, index), each read's candidate found by
    binary search for (its key, the session, the read's clock entry for it)."""
    reads = np.array(sorted(r for r in graph.source if computed[r]), dtype=np.int64)
    if not len(reads):
        return []
    sources = np.array([graph.source[int(r)] for r in reads], dtype=object)
    has_source = sources != None  # noqa: E711 (elementwise)
    source_ids = np.where(has_source, sources, 0).astype(np.int64)
    marks_column, marks_value = np.array(graph.mark_column), np.array(graph.mark_value)
    source_column = np.where(has_source, marks_column[source_ids], 0)
    source_value = np.where(has_source, marks_value[source_ids], 0)
    source_or_none = np.where(has_source, source_ids, -1)
    read_keys = graph.key[reads]
    read_clocks = clocks[reads]
    found: list[tuple] = []

    def stale(candidates: np.ndarray, present: np.ndarray, among: np.ndarray | slice = slice(None)) -> None:
        after_source = clocks[candidates, source_column[among]] >= source_value[among]
        bad = present & (candidates != source_or_none[among]) & (~has_source[among] | after_source)
        for i in np.flatnonzero(bad):
            at = i if isinstance(among, slice) else among[i]
            source = int(source_ids[at]) if has_source[at] else None
            pattern = "WriteCORead" if source is not None else "WriteCOInitRead"
            found.append((pattern, int(reads[at]), source, int(candidates[i])))

    sessions = len(graph.column)
    writes = np.flatnonzero(graph.is_write & graph.acknowledged & computed)
    if len(writes):
        span = int(marks_value[writes].max()) + 2  # index values, and room for "no write yet"
        codes = (graph.key[writes] * sessions + marks_column[writes]) * span + marks_value[writes]
        by_code = np.argsort(codes, kind="stable")
        codes, writes = codes[by_code], writes[by_code]
        for session in range(sessions):
            wanted = read_keys * sessions + session
            seen = np.minimum(read_clocks[:, session], span - 1)
            position = np.searchsorted(codes, wanted * span + seen, side="right") - 1
            position_ok = np.maximum(position, 0)
            present = (position >= 0) & (codes[position_ok] // span == wanted)
            stale(writes[position_ok], present)
    for write, column in graph.virtual.items():  # unknown writes somebody read
        if not computed[write]:
            continue
        among = np.flatnonzero(read_keys == graph.key[write])
        stale(np.full(len(among), write), read_clocks[among, column] >= 1, among)
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
        for pred in graph.preds(node):
            if pred not in parent and clocks[pred][column] >= value:
                parent[pred] = node
                queue.append(pred)
    path: list[Op] = []
    at: int | None = start if start in parent else None
    while at is not None:
        path.append(graph.ops[at])
        at = parent[at]
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
        node = next(p for p in graph.preds(node) if p in remaining)
    cycle = walk[seen[node] :]
    cycle.reverse()  # in causal order
    return [graph.ops[i] for i in cycle][: MAX_PATH * 2]


def check(ops: list[Op]) -> CheckResult:
    """Every bad pattern in ``ops``, counted, with a few examples of each. The cyclic garbage
    collector is paused meanwhile: the check makes a few small objects per operation and none
    that refer to each other, and with a long history alive, the collections it set off took
    most of the time (a 300,000-operation history checked 3x faster without them)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check(ops)
    finally:
        if paused:
            gc.enable()


def _check(ops: list[Op]) -> CheckResult:
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
    writes = int(graph.is_write.sum())
    return CheckResult(
        ops=len(ops),
        reads=len(ops) - writes,
        writes=writes,
        sessions=len(graph.column),
        counts=counts,
        examples=examples,
        seconds=time.perf_counter() - began,
    )
