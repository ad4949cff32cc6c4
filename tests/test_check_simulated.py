"""The histories made without a cluster (loadtest/check/simulated.py) and the checkers on them:
a store that delivers causally gives histories the causal checker passes, one that delivers in
any order gives anomalies it finds; registers give linearizable histories, and one changed read
makes them not; a history written to disk reads back the same."""

from __future__ import annotations

import dataclasses

from loadtest.check.causal import check
from loadtest.check.history import read_ops, write_ops
from loadtest.check.linearizable import READ, check_linearizable
from loadtest.check.simulated import causal_history, linearizable_history


def test_causal_delivery_gives_histories_the_checker_passes():
    for seed in range(3):
        assert check(causal_history(20_000, seed=seed)).violations == 0


def test_delivery_in_any_order_gives_anomalies_the_checker_finds():
    result = check(causal_history(20_000, causal=False))
    assert result.counts["WriteCORead"] + result.counts["WriteCOInitRead"] > 0
    assert result.counts["ThinAirRead"] == 0


def test_registers_give_linearizable_histories_and_a_changed_read_is_caught():
    history = linearizable_history(2_000, seed=3)
    assert check_linearizable(history).ok
    victim = next(i for i, op in enumerate(history) if op.kind == READ and op.result is not None)
    history[victim] = dataclasses.replace(history[victim], result="never-written")
    result = check_linearizable(history)
    assert result.violations == 1 and not result.ok


def test_a_history_on_disk_reads_back_the_same(tmp_path):
    history = causal_history(2_000)
    path = tmp_path / "ops.jsonl.gz"
    assert write_ops(path, history) == len(history)
    back = read_ops(path)
    untimed = [dataclasses.replace(op, start=0.0, end=0.0) for op in history]
    assert [dataclasses.replace(op, start=0.0, end=0.0) for op in back] == untimed
    assert check(back).counts == check(history).counts
