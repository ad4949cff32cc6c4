"""Random concurrent histories of strong operations, recorded for the linearizability checker
(loadtest/check/linearizable.py): shared by the tests of both ways of running them."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Sequence

from causal_client import CausalClient, CompareAndSet
from causal_client.commands import CommandResult
from causal_client.errors import Conflict, NoQuorum, OutcomeUnknown
from helpers.waiting import unique
from loadtest.check.linearizable import EXECUTE, READ, WRITE, StrongOp, check_linearizable


def random_history(
    clients: Sequence[CausalClient], regions: str, namespace: str, seconds: float, per_region: int = 2
) -> list[StrongOp]:
    """``per_region`` sessions at each region (``clients[i]`` at ``regions[i]``) on three keys for
    ``seconds``: writes, reads and compare-and-sets at random, each with its call and return
    times. An operation that surely did not take effect is left out; one of unknown outcome is
    kept without a return time."""
    keys = [unique("lin") for _ in range(3)]
    ops: list[StrongOp] = []
    clock = time.monotonic()
    ids = itertools.count()
    lock = threading.Lock()
    deadline = clock + seconds
    sessions = len(regions) * per_region

    def session_loop(client: CausalClient, region: str, number: int) -> None:
        rng = random.Random(number)
        s = client.session(region)
        n = 0
        while time.monotonic() < deadline:
            key, n = rng.choice(keys), n + 1
            roll = rng.random()
            kind, arg = (
                (WRITE, f"{region}{number}.{n}")
                if roll < 0.35
                else (READ, None)
                if roll < 0.7
                else (EXECUTE, None)
            )
            if kind == EXECUTE:
                seen = [
                    None,
                    *(f"{r}{m}.{k}" for r in regions for m in range(sessions) for k in (n - 1, n - 2)),
                ]
                arg = CompareAndSet(rng.choice(seen), f"{region}{number}.{n}")
            start = time.monotonic() - clock
            result: object = None
            end: float | None = None
            try:
                if kind == WRITE:
                    s.strong_write(namespace, key, arg)
                elif kind == READ:
                    result = s.strong_read(namespace, key).value
                else:
                    done = s.execute(namespace, key, arg)
                    result = CommandResult(done.applied, done.value)
                end = time.monotonic() - clock
            except (Conflict, NoQuorum):
                continue  # did not take effect (a conflict), or a read that constrains nothing
            except OutcomeUnknown:
                if kind == READ:
                    continue
            with lock:
                ops.append(StrongOp(next(ids), number, key, kind, arg, result, start, end))

    threads = [
        threading.Thread(target=session_loop, args=(clients[i % len(regions)], regions[i % len(regions)], i))
        for i in range(sessions)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ops


def assert_linearizable_history(
    clients: Sequence[CausalClient], regions: str, namespace: str, seconds: float, at_least: int
) -> list[StrongOp]:
    """A random history from ``clients`` (closed afterwards), checked: at least ``at_least``
    operations, and linearizable. Returns the operations."""
    try:
        ops = random_history(clients, regions, namespace, seconds)
    finally:
        for client in clients:
            client.close()
    result = check_linearizable(ops)
    assert result.operations >= at_least, result
    assert result.ok, (result.violations, result.undecided, result.examples[:1])
    return ops
