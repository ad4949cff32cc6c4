"""The linearizability checker (loadtest/check/linearizable.py) and the register's commands
(causal_client/commands.py): histories a single register explains pass; the anomalies a broken
strong path shows (a stale read after a write returned, a new value then an old one, two
compare-and-sets that both won) fail; unknown outcomes may or may not have taken effect."""

from __future__ import annotations

import itertools
import random

import pytest

from causal_client import commands
from causal_client.commands import (
    BadCommand,
    CommandResult,
    CompareAndSet,
    Decrement,
    InsertIfAbsent,
    Prepend,
)
from loadtest.check.linearizable import EXECUTE, READ, WRITE, StrongOp, check_linearizable, linearizable

_ids = itertools.count()


def op(kind, start, end, arg=None, result=None, key="k", session=0) -> StrongOp:
    return StrongOp(next(_ids), session, key, kind, arg, result, start, end)


def w(value, start, end, **kw):
    return op(WRITE, start, end, arg=value, **kw)


def r(value, start, end, **kw):
    return op(READ, start, end, result=value, **kw)


def x(command, applied, value, start, end, **kw):
    return op(EXECUTE, start, end, arg=command, result=CommandResult(applied, value), **kw)


# -- commands ------------------------------------------------------------------------------------
def test_commands_mean_what_their_names_say():
    assert InsertIfAbsent("ann").apply(None) == CommandResult(True, "ann")
    assert InsertIfAbsent("bob").apply("ann") == CommandResult(False, "ann")
    assert CompareAndSet(None, "a").apply(None) == CommandResult(True, "a")
    assert CompareAndSet("a", "b").apply("a") == CommandResult(True, "b")
    assert CompareAndSet("a", "b").apply("c") == CommandResult(False, "c")
    assert Decrement(2).apply("5") == CommandResult(True, "3")
    assert Decrement(6).apply("5") == CommandResult(False, "5")  # never below the floor (0)
    assert Decrement(3, floor=-5).apply("0") == CommandResult(True, "-3")
    assert Decrement(1).apply(None) == CommandResult(False, None)
    assert Decrement(1).apply("seven") == CommandResult(False, "seven")
    assert Prepend("t2").apply("t1") == CommandResult(True, "t2 t1")
    assert Prepend("t1").apply(None) == CommandResult(True, "t1")
    assert Prepend("t1").apply("t2 t1") == CommandResult(False, "t2 t1")  # once, even when retried
    assert Prepend("t3", keep=2).apply("t2 t1") == CommandResult(True, "t3 t2")


@pytest.mark.parametrize(
    "command",
    [
        InsertIfAbsent("v"),
        CompareAndSet(None, "n"),
        CompareAndSet("o", "n"),
        Decrement(3, 1),
        Prepend("t", 5),
    ],
)
def test_a_command_survives_the_wire(command):
    assert commands.parse(command.name, command.args()) == command


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: InsertIfAbsent("x" * 5000), "at most 4096"),
        (lambda: InsertIfAbsent("line\nbreak"), "printable"),
        (lambda: Decrement(0), "positive integer"),
        (lambda: Decrement(True), "positive integer"),  # type: ignore[arg-type]
        (lambda: Prepend("two words"), "without spaces"),
        (lambda: Prepend("t", keep=0), "positive number"),
        (lambda: commands.parse("increment-twice", ["1"]), "unknown command"),
        (lambda: commands.parse("decrement", ["one", "0"]), "bad arguments"),
        (lambda: commands.parse("insert-if-absent", []), "bad arguments"),
    ],
)
def test_bad_commands_are_refused_with_a_reason(make, message):
    with pytest.raises(BadCommand, match=message):
        make()


# -- histories that a register explains ------------------------------------------------------------
def test_sequential_and_overlapping_histories_pass():
    assert linearizable([w("a", 0, 1), r("a", 2, 3), w("b", 4, 5), r("b", 6, 7)])
    # a read overlapping a write may return either value
    assert linearizable([w("a", 0, 1), w("b", 2, 6), r("a", 3, 4), r("b", 5, 7)])
    assert linearizable([w("a", 0, 1), w("b", 2, 6), r("b", 3, 4), r("b", 5, 7)])
    assert linearizable([r(None, 0, 1), x(InsertIfAbsent("ann"), True, "ann", 2, 3)])


def test_a_write_of_unknown_outcome_may_or_may_not_have_happened():
    assert linearizable([w("a", 0, 1), w("b", 2, None), r("a", 3, 4)])
    assert linearizable([w("a", 0, 1), w("b", 2, None), r("b", 3, 4)])
    assert linearizable([w("a", 0, 1), w("b", 2, None), r("b", 3, 4), r("b", 5, 6)])
    # ... but once seen it has happened: a later read cannot go back
    assert not linearizable([w("a", 0, 1), w("b", 2, None), r("b", 3, 4), r("a", 5, 6)])


# -- anomalies -----------------------------------------------------------------------------------
def test_a_stale_read_after_a_write_returned_fails():
    assert not linearizable([w("a", 0, 1), w("b", 2, 3), r("a", 4, 5)])


def test_a_new_value_then_an_old_one_fails():
    """What Vivace's read write-back prevents: a write still in progress (its timestamp at a
    minority), one read sees it, a later read does not."""
    assert not linearizable([w("a", 0, 1), w("b", 2, 10), r("b", 3, 4), r("a", 5, 6)])


def test_two_compare_and_sets_from_the_same_value_cannot_both_win():
    history = [
        w("0", 0, 1),
        x(CompareAndSet("0", "1"), True, "1", 2, 5),
        x(CompareAndSet("0", "2"), True, "2", 3, 6),
    ]
    assert not linearizable(history)
    history[2] = x(CompareAndSet("0", "2"), False, "1", 3, 6)
    assert linearizable(history)


def test_two_sign_ups_for_one_name_cannot_both_win():
    assert not linearizable([
        x(InsertIfAbsent("ann@v"), True, "ann@v", 0, 5), x(InsertIfAbsent("ann@f"), True, "ann@f", 1, 6),
    ])  # fmt: skip


def test_keys_are_checked_alone_and_reported():
    ops = [
        w("a", 0, 1, key="k1"),
        r("a", 2, 3, key="k1"),
        w("a", 0, 1, key="k2"),
        w("b", 2, 3, key="k2"),
        r("a", 4, 5, key="k2"),
    ]
    result = check_linearizable(ops)
    assert (result.keys, result.operations, result.violations, result.ok) == (2, 5, 1, False)
    assert {o.key for o in result.examples[0]} == {"k2"}


def test_a_search_out_of_budget_is_undecided_not_passed():
    ops = [w(str(i), 0, 100, session=i) for i in range(14)] + [r("0", 101, 102)]
    assert linearizable(ops, max_states=50) is None
    assert check_linearizable(ops, max_states=50).undecided == 1


def test_random_histories_of_a_real_register_pass_and_a_tampered_read_fails():
    """A register with atomic operations at random instants inside random intervals: always
    linearizable; change one read to a value no order explains and it is not."""
    rng = random.Random(7)
    for _ in range(30):
        value: str | None = None
        history, moments = [], sorted(rng.uniform(0, 100) for _ in range(40))
        for i, at in enumerate(moments):
            start, end = at - rng.uniform(0, 5), at + rng.uniform(0, 5)
            if rng.random() < 0.5:
                value = f"v{i}"
                history.append(w(value, start, end, session=i))
            elif rng.random() < 0.5:
                outcome = (
                    Decrement(1).apply(value)
                    if value and value.isdigit()
                    else CompareAndSet(value, str(i)).apply(value)
                )
                command = Decrement(1) if value and value.isdigit() else CompareAndSet(value, str(i))
                value = outcome.value
                history.append(x(command, outcome.applied, outcome.value, start, end, session=i))
            else:
                history.append(r(value, start, end, session=i))
        assert linearizable(history), history
        reads = [i for i, o in enumerate(history) if o.kind == READ]
        if reads:
            i = reads[-1]
            history[i] = r("never-written", history[i].start, history[i].end)
            assert linearizable(history) is False


def test_unknown_outcomes_nobody_saw_are_left_out_and_the_search_stays_small():
    """A region down for two seconds leaves dozens of writes and compare-and-sets of unknown
    outcome, all open to the end. Nobody saw their values, so they are left out: a history is
    then decided at once where, searched whole, a violation at its end makes the search try
    every subset of them first (the budget below runs out). One whose value a read returned
    stays in, and must have happened."""
    history, clock = [], 0.0
    for i in range(40):
        history.append(w(f"v{i}", clock, clock + 1, session=0))
        history.append(r(f"v{i}", clock + 2, clock + 3, session=0))
        lost = f"lost{i}"
        history.append(
            w(lost, clock, None, session=1)
            if i % 2
            else x(CompareAndSet(f"v{i}", lost), False, None, clock, None)
        )
        clock += 4
    seen = w("seen", clock, None, session=2)
    history += [seen, r("seen", clock + 1, clock + 2), r("seen", clock + 3, clock + 4)]
    result = check_linearizable(history, max_states=5_000)
    assert (result.ok, result.unseen_unknowns) == (True, 40)
    history.append(r("v39", clock + 5, clock + 6))  # the seen one cannot be undone
    assert linearizable(history, max_states=5_000) is None  # searched whole
    result = check_linearizable(history, max_states=5_000)
    assert (result.violations, result.undecided) == (1, 0)


def test_leaving_unseen_unknowns_out_never_changes_the_verdict():
    """Small random histories of a register (writes, reads, compare-and-sets from any value
    written so far, insert-if-absents) at random instants inside their calls, some of unknown
    outcome (taken effect or not), some reads then tampered with: searched whole and without the
    unseen unknowns, the verdict is the same. With a decrement in the history nothing is left
    out."""
    rng = random.Random(11)
    verdicts, left_out = [], 0
    for _ in range(600):
        value: str | None = None
        history, written = [], [None]
        for i, at in enumerate(sorted(rng.uniform(0, 20) for _ in range(9))):
            start, end = at - rng.uniform(0, 3), at + rng.uniform(0, 3)
            unknown = rng.random() < 0.3
            takes_effect = not unknown or rng.random() < 0.5
            roll, new = rng.random(), f"v{i}"
            if roll < 0.3:
                value = new if takes_effect else value
                history.append(w(new, start, None if unknown else end, session=i))
            elif roll < 0.55:
                history.append(r(value, start, end, session=i))
            else:
                command = CompareAndSet(rng.choice(written), new) if roll < 0.85 else InsertIfAbsent(new)
                outcome = command.apply(value)
                value = outcome.value if takes_effect else value
                history.append(
                    x(command, outcome.applied, outcome.value, start, None if unknown else end, session=i)
                )
            written.append(new)
        reads = [i for i, o in enumerate(history) if o.kind == READ]
        if reads and rng.random() < 0.3:
            i = rng.choice(reads)
            history[i] = r(rng.choice(written), history[i].start, history[i].end)
        result = check_linearizable(history)
        assert result.ok == linearizable(history), history
        verdicts.append(result.ok)
        left_out += result.unseen_unknowns
    assert set(verdicts) == {True, False} and left_out > 100
    with_decrement = [w("3", 0, 1), x(Decrement(1), True, "2", 2, None), r("2", 3, 4)]
    assert check_linearizable(with_decrement).unseen_unknowns == 0


def test_a_recorded_history_is_kept_and_checked_again_with_the_same_verdict(tmp_path):
    """A soak keeps each segment's strong operations beside its causal history, commands and
    results included, so that a violation it reports can be looked at and checked again."""
    from loadtest.check.strong_sessions import read_strong_ops, strong_history_path, write_strong_ops

    bad = [w("a", 0, 1), w("b", 2, 10), r("b", 3, 4), r("a", 5, 6)]
    good = [x(CompareAndSet(None, "c"), True, "c", 11, 12, key="j"), r("c", 13, 14, key="j")]
    path = strong_history_path(tmp_path / "013-saturn-clock.jsonl.gz")
    assert path.name == "013-saturn-clock.strong.pickle.gz"
    write_strong_ops(path, bad + good)
    again = read_strong_ops(path)
    assert again == bad + good
    before, after = check_linearizable(bad + good), check_linearizable(again)
    verdict = (before.violations, before.keys, before.operations)
    assert (after.violations, after.keys, after.operations) == verdict
    assert after.violations == 1
