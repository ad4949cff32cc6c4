"""Read atomicity (Eiger §4, "fractured reads"): a multi-read that returns one key's value from a
batch must return, for every other key of that batch it reads, the batch's value or a newer one.

A batch's writes share a ``txn`` number in the history, a multi-read's reads another. Which of two
writes of a key is newer is their labels' order (the store is last-writer-wins by label): an
acknowledged atomic batch's writes carry its label; any write's label is also known once some read
returned it (reads record the label of the cell they saw). A comparison whose labels are unknown
(a write of unknown outcome that nobody read) is skipped, never counted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from loadtest.check.history import Kind, Op, Outcome

EXAMPLES = 3


@dataclass
class Fracture:
    """A multi-read that saw ``seen`` (a batch's write) but, for another key of that batch,
    ``got`` (an older write, or None for the initial state) instead of ``missed``."""

    seen: Op
    missed: Op
    got: Op | None


@dataclass
class AtomicityResult:
    multi_reads: int
    batches: int
    fractured: int  # multi-reads that saw part of a batch
    examples: list[Fracture] = field(default_factory=list)


def check_atomicity(ops: list[Op]) -> AtomicityResult:
    writes_by_value: dict[str, Op] = {}
    batch_writes: dict[int, dict[tuple[str, str], Op]] = defaultdict(dict)
    label_of: dict[str, tuple[int, str]] = {}
    multi: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind == Kind.WRITE:
            writes_by_value[op.value] = op  # type: ignore[index]
            if op.txn is not None:
                batch_writes[op.txn][op.key] = op
            if op.label is not None and op.outcome == Outcome.OK:
                label_of[op.value] = op.label  # type: ignore[index]
        elif op.outcome == Outcome.OK:
            if op.value is not None and op.label is not None:
                label_of.setdefault(op.value, op.label)
            if op.txn is not None:
                multi[op.txn].append(op)
    result = AtomicityResult(len(multi), len(batch_writes), 0)
    for reads in multi.values():
        fracture = _fracture(reads, writes_by_value, batch_writes, label_of)
        if fracture is not None:
            result.fractured += 1
            if len(result.examples) < EXAMPLES:
                result.examples.append(fracture)
    return result


def _fracture(
    reads: list[Op],
    writes_by_value: dict[str, Op],
    batch_writes: dict[int, dict[tuple[str, str], Op]],
    label_of: dict[str, tuple[int, str]],
) -> Fracture | None:
    for read in reads:
        seen = writes_by_value.get(read.value) if read.value is not None else None
        if seen is None or seen.txn is None:
            continue
        batch = batch_writes[seen.txn]
        for other in reads:
            missed = batch.get(other.key)
            if other is read or missed is None or other.value == missed.value:
                continue
            if other.value is None:
                return Fracture(seen, missed, None)
            got = writes_by_value.get(other.value)
            got_label, missed_label = label_of.get(other.value), label_of.get(missed.value)  # type: ignore[arg-type]
            if (
                got is not None
                and got_label is not None
                and missed_label is not None
                and got_label < missed_label
            ):
                return Fracture(seen, missed, got)
    return None
