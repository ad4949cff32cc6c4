"""What a checked run records: every session's operations, in the order the session made them.

A key is ``(group, row)`` with one value column; every value written is unique across the run
(``"<session>.<n>"``), so a read names the one write it read from ("differentiated histories",
Bouajjani et al., POPL'17). A write whose call failed may or may not have been applied (the store
may have died before replying): it is kept as ``UNKNOWN``, a write someone may read, but not in
its session's order, since the session never learned of it and its later operations do not
depend on it. The writes of one batch, and the reads of one multi-read, share a ``txn`` number:
a multi-read must not see part of a batch (atomicity.py).
"""

from __future__ import annotations

import enum
import gzip
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

Key = tuple[str, str]  # (group, row)


class Kind(enum.Enum):
    READ = "r"
    WRITE = "w"


class Outcome(enum.Enum):
    OK = "ok"
    UNKNOWN = "unknown"  # a write whose call failed: applied or not, nobody knows


@dataclass(frozen=True, slots=True)
class Op:
    """One operation. ``value`` is what was written, or what the read returned (None: the key's
    initial state, never written as far as the read could tell). ``label`` is the write's label
    as (ts, src) when acknowledged, for the lost-write check."""

    id: int
    session: int
    index: int  # position in the session's order, from 1 (UNKNOWN writes: the preceding op's)
    kind: Kind
    key: Key
    value: str | None
    outcome: Outcome
    region: str
    start: float  # seconds since the run began
    end: float
    label: tuple[int, str] | None = None
    #: the transaction it belongs to: an atomic batch's writes, a multi-read's reads share one
    txn: int | None = None


@dataclass
class Failure:
    """A call that failed (a read, a migration, a resume): an availability fact, not history."""

    session: int
    what: str
    region: str
    error: str  # the exception's type name
    at: float


@dataclass
class History:
    """Thread-safe: each session appends its own operations."""

    ops: list[Op] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # group → acked/unknown
    #: errors a call raised that are not the client's typed ``CausalError`` (a client bug:
    #: every error a caller sees must be typed), as "session: what: Type: message"
    untyped: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _txns: int = 0

    def add(self, **fields) -> Op:
        with self._lock:
            op = Op(id=len(self.ops), **fields)
            self.ops.append(op)
            return op

    def new_txn(self) -> int:
        """A number for a transaction's operations (a batch's writes, a multi-read's reads)."""
        with self._lock:
            self._txns += 1
            return self._txns

    def failed(self, failure: Failure) -> None:
        with self._lock:
            self.failures.append(failure)

    def untyped_error(self, session: int, what: str, exc: BaseException) -> None:
        with self._lock:
            self.untyped.append(f"session {session}: {what}: {type(exc).__name__}: {exc}")

    def counted(self, group: str, outcome: Outcome) -> None:
        """An increment of the group's shared counter: acknowledged, or of unknown outcome."""
        with self._lock:
            tally = self.counters.setdefault(group, {"ok": 0, "unknown": 0})
            tally[outcome.value] += 1


# -- on disk: one JSON array per line, gzipped; a long run writes its history in such chunks ----
def op_row(op: Op) -> list:
    label = op.label or (None, None)
    return [op.id, op.session, op.index, op.kind.value, *op.key, op.value, op.outcome.value, op.region,
            round(op.start, 6), round(op.end, 6), *label, op.txn]  # fmt: skip


def op_of(row: list) -> Op:
    (id_, session, index, kind, group, key, value, outcome, region, start, end, ts, src, txn) = row
    label = None if ts is None else (ts, src)
    return Op(id_, session, index, Kind(kind), (group, key), value, Outcome(outcome), region, start, end,
              label, txn)  # fmt: skip


def write_ops(path: Path, ops: Iterable[Op]) -> int:
    """Writes ``ops`` to ``path`` (.jsonl.gz); returns how many."""
    count = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as out:
        for op in ops:
            out.write(json.dumps(op_row(op), separators=(",", ":")))
            out.write("\n")
            count += 1
    return count


def read_ops(path: Path) -> list[Op]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [op_of(json.loads(line)) for line in lines]
