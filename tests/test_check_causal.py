"""The history checker on histories written by hand (each bad pattern, and the histories that are
causally consistent although they look odd), and on random histories against a brute-force
checker that computes the causal order by transitive closure."""

from __future__ import annotations

import dataclasses
import random
from collections import defaultdict

import pytest

from loadtest.check.causal import PATTERNS, check
from loadtest.check.history import History, Kind, Op, Outcome


class Builder:
    """Sessions' operations in the order they happen; indexes as the recorder gives them."""

    def __init__(self) -> None:
        self.history = History()
        self.index: dict[int, int] = defaultdict(int)

    def _op(self, session: int, kind: Kind, key: str, value: str | None, outcome=Outcome.OK) -> Op:
        if outcome == Outcome.OK:
            self.index[session] += 1
        return self.history.add(
            session=session, index=self.index[session], kind=kind, key=("g", key), value=value,
            outcome=outcome, region="a", start=0.0, end=0.0,
        )  # fmt: skip

    def w(self, session: int, key: str, value: str, outcome=Outcome.OK) -> Op:
        return self._op(session, Kind.WRITE, key, value, outcome)

    def r(self, session: int, key: str, value: str | None) -> Op:
        return self._op(session, Kind.READ, key, value)

    def result(self):
        return check(self.history.ops)


def only(result, pattern: str, count: int = 1) -> None:
    assert result.counts == {p: (count if p == pattern else 0) for p in PATTERNS}, result.counts


def test_a_causal_chain_read_in_order_is_consistent():
    h = Builder()
    h.w(1, "x", "a")
    h.r(2, "x", "a")
    h.w(2, "y", "b")
    h.r(3, "y", "b")
    h.r(3, "x", "a")
    result = h.result()
    assert result.violations == 0
    assert (result.ops, result.reads, result.writes, result.sessions) == (5, 3, 2, 3)


def test_the_answer_seen_without_its_question():
    """The causality-3region anomaly: y answers x, a reader sees y and then not x."""
    h = Builder()
    h.w(1, "x", "question")
    h.r(2, "x", "question")
    h.w(2, "y", "answer")
    h.r(3, "y", "answer")
    stale = h.r(3, "x", None)
    result = h.result()
    only(result, "WriteCOInitRead")
    example = result.examples["WriteCOInitRead"][0]
    assert example.read == stale and example.source is None and example.newer.value == "question"
    assert [op.value for op in example.chain] == ["question", "question", "answer", "answer", None]


def test_an_older_value_after_a_newer_one_it_depends_on():
    h = Builder()
    h.w(1, "x", "x1")
    h.w(1, "x", "x2")
    h.r(2, "x", "x2")
    h.w(2, "y", "y1")
    h.r(3, "y", "y1")
    h.r(3, "x", "x1")
    only(h.result(), "WriteCORead")


def test_read_your_writes_and_monotonic_reads():
    h = Builder()
    h.w(1, "x", "mine")
    h.r(1, "x", None)  # its own write, gone
    h.w(2, "z", "z1")
    h.w(2, "z", "z2")
    h.r(3, "z", "z2")
    h.r(3, "z", "z1")  # went back in time
    result = h.result()
    assert result.counts["WriteCOInitRead"] == 1 and result.counts["WriteCORead"] == 1


def test_concurrent_writes_may_be_seen_in_either_order():
    """Causal consistency orders only what is causally related: two sessions may see two
    concurrent writes in opposite orders (convergence is checked apart, after the run)."""
    h = Builder()
    h.w(1, "x", "one")
    h.w(2, "x", "two")
    h.r(3, "x", "one")
    h.r(3, "x", "two")
    h.r(4, "x", "two")
    h.r(4, "x", "one")
    h.r(5, "x", None)
    assert h.result().violations == 0


def test_thin_air_reads():
    h = Builder()
    h.w(1, "x", "real")
    h.r(2, "x", "never written")
    h.r(2, "y", "real")  # written, but to another key
    only(h.result(), "ThinAirRead", 2)


def test_a_read_of_a_value_written_later_in_causal_order_is_a_cycle():
    h = Builder()
    h.r(1, "x", "b")  # reads what session 2 writes only after it saw session 1's write
    h.w(1, "y", "a")
    h.r(2, "y", "a")
    h.w(2, "x", "b")
    result = h.result()
    assert result.counts["CyclicCO"] == 4
    cycle = result.examples["CyclicCO"][0].chain
    assert {op.value for op in cycle} == {"a", "b"} and len(cycle) == 4


def test_a_write_of_unknown_outcome_binds_only_those_who_read_it():
    h = Builder()
    h.w(1, "x", "maybe", Outcome.UNKNOWN)  # the call failed: the session does not know of it
    h.r(1, "x", None)  # so not seeing it is no violation
    h.r(2, "x", "maybe")  # it was applied after all, and someone saw it
    h.w(2, "y", "after-maybe")
    h.r(3, "y", "after-maybe")
    h.r(3, "x", None)  # depends on it through session 2: a violation
    only(h.result(), "WriteCOInitRead")


# -- random histories, against the definitions computed by brute force ----------------------------
def brute_force(ops: list[Op]) -> dict[str, set[int]]:
    """The patterns by their definitions: co as the transitive closure of po and wr."""
    writes = {op.value: op for op in ops if op.kind == Kind.WRITE}
    flagged: dict[str, set[int]] = {p: set() for p in PATTERNS}
    preds: dict[int, set[int]] = defaultdict(set)
    by_session: dict[int, list[Op]] = defaultdict(list)
    for op in ops:
        if op.outcome == Outcome.OK:
            by_session[op.session].append(op)
    last_at = {(op.session, op.index): op.id for op in ops if op.outcome == Outcome.OK}
    for op in ops:
        if op.outcome == Outcome.OK and op.index > 1:
            preds[op.id].add(last_at[op.session, op.index - 1])
        if op.outcome == Outcome.UNKNOWN and op.index >= 1:
            preds[op.id].add(last_at[op.session, op.index])
        if op.kind == Kind.READ and op.value is not None:
            source = writes.get(op.value)
            if source is None or source.key != op.key:
                flagged["ThinAirRead"].add(op.id)
            else:
                preds[op.id].add(source.id)
    past: dict[int, set[int]] = {}

    def ancestors(node: int, visiting: frozenset = frozenset()) -> set[int] | None:
        if node in past:
            return past[node]
        if node in visiting:
            return None  # a cycle
        found: set[int] = set()
        for pred in preds[node]:
            above = ancestors(pred, visiting | {node})
            if above is None:
                return None
            found |= above | {pred}
        past[node] = found
        return found

    for op in ops:
        if ancestors(op.id) is None:
            flagged["CyclicCO"].add(op.id)
    for op in ops:
        if op.kind != Kind.READ or op.outcome != Outcome.OK or op.id in flagged["ThinAirRead"]:
            continue
        before = ancestors(op.id)
        if before is None:
            continue
        source = writes.get(op.value) if op.value is not None else None
        for other in before:
            w = ops[other]
            if w.kind != Kind.WRITE or w.key != op.key or w is source:
                continue
            if source is None:
                flagged["WriteCOInitRead"].add(op.id)
            elif source.id in (ancestors(w.id) or set()):
                flagged["WriteCORead"].add(op.id)
    return flagged


def random_history(seed: int, n: int = 240) -> list[Op]:
    """A store with a few replicas that apply writes in random orders (so reads are often stale
    in every way), sessions moving between them, some writes failing."""
    rng = random.Random(seed)
    h = Builder()
    keys = ["x", "y", "z"]
    replicas: list[dict[str, str | None]] = [dict.fromkeys(keys) for _ in range(3)]
    written: list[tuple[str, str]] = []
    for i in range(n):
        session = rng.randrange(5)
        replica = replicas[rng.randrange(3)]
        key = rng.choice(keys)
        if written and rng.random() < 0.3:  # replicate some earlier write somewhere, in any order
            k, v = rng.choice(written)
            replicas[rng.randrange(3)][k] = v
        if rng.random() < 0.45:
            value = f"{session}.{i}"
            outcome = Outcome.UNKNOWN if rng.random() < 0.05 else Outcome.OK
            h.w(session, key, value, outcome)
            replica[key] = value
            written.append((key, value))
        elif rng.random() < 0.03:
            h.r(session, key, f"nobody.{i}")  # thin air, now and then
        else:
            h.r(session, key, replica[key])
    ops = h.history.ops
    for i, op in enumerate(ops):  # odd seeds: now and then a read of a later write (cycles)
        if seed % 2 and op.kind == Kind.READ and rng.random() < 0.03:
            later = [w for w in ops[i + 1 :] if w.kind == Kind.WRITE and w.key == op.key]
            if later:
                ops[i] = dataclasses.replace(op, value=rng.choice(later).value)
    return ops


@pytest.mark.parametrize("seed", range(40))
def test_random_histories_agree_with_brute_force(seed):
    ops = random_history(seed)
    expected = brute_force(ops)
    result = check(ops)
    assert (result.counts["CyclicCO"] > 0) == bool(expected["CyclicCO"]), seed
    if not expected["CyclicCO"]:  # with a cycle, what lies behind it has no causal past to judge
        for pattern in ("ThinAirRead", "WriteCOInitRead", "WriteCORead"):
            assert result.counts[pattern] == len(expected[pattern]), (seed, pattern, result.counts)


def test_random_histories_exercise_every_pattern():
    """The comparison above means something: the random histories do break causality."""
    totals = dict.fromkeys(PATTERNS, 0)
    for seed in range(40):
        for pattern, count in check(random_history(seed)).counts.items():
            totals[pattern] += count
    assert all(count >= 5 for count in totals.values()), totals
