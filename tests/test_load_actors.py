"""Actors report every operation, failures included (a bug of ours must show as failed requests,
not vanish from the figures)."""

from __future__ import annotations

import random
from pathlib import Path

from loadtest.workload.actors import Actor
from loadtest.workload.graph import generate
from loadtest.workload.mix import MIXES, Action, Op
from loadtest.workload.placement import place
from loadtest.workload.plan import Plan
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[1]


class Broken(Actor):
    def do(self, action: Action) -> None:
        if action.op == Op.POST:
            raise KeyError("a bug")


def test_every_operation_is_recorded_and_unexpected_errors_count_as_failures():
    topology = Topology.load(ROOT / "topologies" / "demo-3region.toml")
    graph = generate(40, seed=2)
    plan = Plan(graph, place(graph, topology, 2, 2, seed=2), topology)
    seen: list[tuple[str, str, BaseException | None]] = []
    actor = Broken(plan, 7, MIXES["facebook"], lambda k, n, s, e: seen.append((k, n, e)), random.Random(1))
    actor.perform(Action(Op.HOME, 7))
    actor.perform(Action(Op.POST, 7))
    assert [(n, type(e).__name__ if e else None) for _, n, e in seen] == [
        ("home timeline", None),
        ("post", "KeyError"),
    ]
    assert actor.home == plan.placement.home[7]
    assert len(actor.following) == graph.degree(7)
