"""The visibility budget's arithmetic (loadtest/harness/budget.py) on stage histograms made by
hand: a pair's path through the tree, its configured lags, and what is left over as overhead.
No process is started (the fig7 bench test runs it on a real cluster)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from loadtest.harness import budget
from loadtest.harness.stats import Histogram
from services.topology import Topology

TREE = Topology.load(Path(__file__).resolve().parents[1] / "topologies" / "ec2-7region-mx.toml")


def ages(*seconds: float) -> Histogram:
    return Histogram(((math.inf, float(len(seconds))),), sum(seconds), float(len(seconds)))


def test_a_pairs_path_runs_through_the_serializers_between_its_regions():
    assert TREE.tree_path("ireland", "frankfurt") == ["ireland", "s-i", "frankfurt"]
    path = TREE.tree_path("ireland", "sydney")
    assert path[:2] == ["ireland", "s-i"] and path[-1] == "sydney" and len(path) > 3


def test_a_budget_splits_visibility_into_sink_tree_lag_tree_own_and_after_label():
    lag = TREE.tree_path_ms("ireland", "frankfurt")
    bulk = TREE.region_latency_ms("ireland", "frankfurt")
    sent, label, visible = 0.001, 0.001 + lag / 1000 + 0.002, 0.001 + lag / 1000 + 0.005
    stages = {
        ("ireland", "ireland", "read"): ages(0.0005, 0.0005),
        ("ireland", "ireland", "sent"): ages(sent, sent),
        ("ireland", "ireland", "out:s-i"): ages(0.003),
        ("s-i", "ireland", "in"): ages(0.0035),
        ("s-i", "ireland", "out:frankfurt"): ages(0.010),
        ("frankfurt", "ireland", "label"): ages(label, label),
        ("frankfurt", "ireland", "payload"): ages(bulk / 1000 + 0.001),
        ("frankfurt", "ireland", "visible"): ages(visible, visible),
    }
    (pair,) = [b for b in budget.budgets(TREE, stages) if (b.origin, b.region) == ("ireland", "frankfurt")]
    assert pair.sampled == 2 and pair.tree_lag_ms == pytest.approx(lag)
    assert pair.tree_own_ms == pytest.approx(2.0) and pair.after_label_ms == pytest.approx(3.0)
    assert pair.sent_ms + pair.tree_lag_ms + pair.tree_own_ms + pair.after_label_ms == pytest.approx(
        visible * 1000
    )
    assert pair.overhead_ms == pytest.approx(visible * 1000 - max(bulk, lag))
    assert [(h.a, h.b) for h in pair.hops] == [("ireland", "s-i"), ("s-i", "frankfurt")]
    assert pair.hops[0].taken_ms == pytest.approx(3.5)
    others = [b for b in budget.budgets(TREE, stages) if (b.origin, b.region) != ("ireland", "frankfurt")]
    assert all(b.sampled == 0 and b.visible_ms is None for b in others)
    assert "ireland→frankfurt" in budget.table("saturn", [pair])


def test_the_mean_over_updates_weighs_each_pair_by_its_sampled_updates():
    stages = {
        ("frankfurt", "ireland", "visible"): ages(*[0.030] * 3),
        ("ireland", "frankfurt", "visible"): ages(0.060),
    }
    rows = budget.budgets(TREE, stages)
    assert budget.over_updates(rows, lambda b: b.visible_ms) == pytest.approx((3 * 30 + 60) / 4)
