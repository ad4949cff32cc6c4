"""Linearizability of strong operations on registers (Herlihy & Wing): every operation must seem
to take effect at one instant between its call and its return, in an order that a single
register (``causal_client/commands.py`` for read-modify-writes) would have produced.

The search is Wing & Gong's, with Lowe's memoisation (the one Knossos and Porcupine run): walk
the history's call and return events in time order; at a call, try to linearize that operation
now (the register model must agree with what it returned), and go on; at a return whose
operation is not linearized yet, undo the last choice and try the next. A state already seen
(the same set of linearized operations and the same register value) is not searched again.
Registers are independent (linearizability is compositional), so each key is searched alone.

An operation of unknown outcome (its call failed: applied or not, nobody knows) may take effect
at any instant after its call, or never: it has no return event and its result is not checked.
One whose value nobody saw is left out before the search (``unseen_unknowns``): each such
operation left in doubles the orders the search may try, and a region down for two seconds
leaves dozens of them.

A search that exceeds its budget of states says so (``undecided``): never a pass.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from causal_client.commands import Command, CommandResult, CompareAndSet, InsertIfAbsent

READ, WRITE, EXECUTE = "read", "write", "execute"
MAX_STATES = 2_000_000  # per key; beyond, the key is undecided
EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class StrongOp:
    """One strong operation. ``arg``: a write's value or an execute's command; ``result``: what
    a read returned (a value, None for nothing), an execute's ``CommandResult``; ``end`` None:
    the outcome is unknown (``result`` then means nothing)."""

    id: int
    session: int
    key: str
    kind: str
    arg: str | Command | None
    result: str | CommandResult | None
    start: float
    end: float | None


@dataclass
class LinearizabilityResult:
    keys: int = 0
    operations: int = 0
    violations: int = 0  # keys whose history no single register explains
    undecided: int = 0  # keys whose search ran out of budget
    unseen_unknowns: int = 0  # operations of unknown outcome nobody saw take effect (left out)
    examples: list[list[StrongOp]] = field(default_factory=list)  # a violating key's operations

    @property
    def ok(self) -> bool:
        return self.violations == 0 and self.undecided == 0


def step(value: str | None, op: StrongOp) -> tuple[bool, str | None]:
    """The register model: whether ``op`` can take effect on ``value`` with what it returned, and
    the value after it."""
    if op.kind == READ:
        return op.end is None or op.result == value, value
    if op.kind == WRITE:
        return True, op.arg  # type: ignore[return-value]
    assert isinstance(op.arg, Command)
    outcome = op.arg.apply(value)
    return op.end is None or outcome == op.result, outcome.value


def check_linearizable(
    ops: list[StrongOp], max_states: int = MAX_STATES, initial: Callable[[str], str | None] = lambda key: None
) -> LinearizabilityResult:
    """Every key's history searched alone; ``initial``: each register's value before the run."""
    by_key: dict[str, list[StrongOp]] = defaultdict(list)
    for op in ops:
        by_key[op.key].append(op)
    result = LinearizabilityResult(keys=len(by_key), operations=len(ops))
    for key, history in sorted(by_key.items()):
        unseen = unseen_unknowns(history)
        result.unseen_unknowns += len(unseen)
        verdict = linearizable([op for op in history if op.id not in unseen], initial(key), max_states)
        if verdict is None:
            result.undecided += 1
        elif not verdict:
            result.violations += 1
            if len(result.examples) < EXAMPLES:
                result.examples.append(sorted(history, key=lambda o: o.start))
    return result


def unseen_unknowns(history: list[StrongOp]) -> set[int]:
    """The ids of the operations of unknown outcome whose value no operation saw: no read or
    known read-modify-write returned it, no compare-and-set expected it. The history is
    linearizable with them if and only if it is without them: if one took effect, the ops
    ordered after it until a blind write replaced its value either saw it (none did) or were
    others of unknown outcome that changed nothing on a value they did not expect, so that
    stretch reads the same with all of them left out. Only sound while every command in the
    history is one that changes nothing on a value it did not name (compare-and-set,
    insert-if-absent); a decrement would pass an unseen value on, and then nothing is left out."""
    if any(op.kind == EXECUTE and not isinstance(op.arg, (CompareAndSet, InsertIfAbsent)) for op in history):
        return set()
    seen: set[str | None] = set()
    for op in history:
        if isinstance(op.arg, CompareAndSet):
            seen.add(op.arg.expected)
        if op.end is not None and op.kind != WRITE:
            seen.add(op.result.value if isinstance(op.result, CommandResult) else op.result)
    return {op.id for op in history if op.end is None and _value_written(op) not in seen}


def _value_written(op: StrongOp) -> str | None:
    """What a write or a command leaves in the register if it takes effect and changes it."""
    if isinstance(op.arg, CompareAndSet):
        return op.arg.new
    if isinstance(op.arg, InsertIfAbsent):
        return op.arg.value
    return op.arg  # type: ignore[return-value]


class _Entry:
    """A call or return event in a doubly linked list (events are lifted out and put back)."""

    __slots__ = ("index", "is_call", "match", "next", "op", "prev")

    def __init__(self, op: StrongOp | None, index: int, is_call: bool) -> None:
        self.op = op
        self.index = index
        self.is_call = is_call
        self.match: _Entry | None = None  # a call's return event (None: unknown outcome)
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def linearizable(
    history: list[StrongOp], initial: str | None = None, max_states: int = MAX_STATES
) -> bool | None:
    """Whether one register's history is linearizable (None: the search ran out of budget)."""
    events: list[tuple[float, int, _Entry]] = []  # (time, returns before calls at a tie, entry)
    for i, op in enumerate(history):
        call = _Entry(op, i, True)
        events.append((op.start, 1, call))
        if op.end is not None:
            ret = _Entry(op, i, False)
            call.match = ret
            events.append((op.end, 0, ret))
    events.sort(key=lambda e: (e[0], e[1]))
    head = _Entry(None, -1, False)  # a sentinel before the first event
    last = head
    for _, _, event in events:
        last.next, event.prev = event, last
        last = event

    def lift(call: _Entry) -> None:
        for entry in (call, call.match):
            if entry is not None:
                assert entry.prev is not None
                entry.prev.next = entry.next
                if entry.next is not None:
                    entry.next.prev = entry.prev

    def unlift(call: _Entry) -> None:
        for entry in (call.match, call):  # the reverse order of lift
            if entry is not None:
                assert entry.prev is not None
                entry.prev.next = entry
                if entry.next is not None:
                    entry.next.prev = entry

    value = initial
    linearized = 0  # a bitset of the history's indices
    seen: set[tuple[int, str | None]] = set()
    stack: list[tuple[_Entry, str | None]] = []  # (the call lifted, the value before it)
    entry: _Entry | None = head.next
    while head.next is not None:
        if entry is None:  # only unknown-outcome calls are left: they may never take effect
            return True
        if entry.is_call:
            assert entry.op is not None
            ok, after = step(value, entry.op)
            bits = linearized | (1 << entry.index)
            if ok and (bits, after) not in seen:
                seen.add((bits, after))
                if len(seen) > max_states:
                    return None
                stack.append((entry, value))
                value, linearized = after, bits
                lift(entry)
                entry = head.next
            else:
                entry = entry.next
        else:  # an operation returned before any order could place it: undo the last choice
            if not stack:
                return False
            call, value = stack.pop()
            linearized &= ~(1 << call.index)
            unlift(call)
            entry = call.next
    return True
