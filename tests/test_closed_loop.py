"""The closed-loop runners: in threads of one process, and spread over client processes (for
machines where one process of clients would be the ceiling). No cluster: the operations are
timed sleeps, so what is checked is the window, the counting and the failure paths."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from loadtest.harness.experiment import BenchError
from loadtest.harness.loop import Op, run_closed_loop
from loadtest.harness.loop_processes import run_closed_loop_in_processes

CALL_S = 0.005


def sleeper(writes_every: int) -> Op:
    calls = [0]

    def op() -> bool:
        calls[0] += 1
        time.sleep(CALL_S)
        return calls[0] % writes_every == 0

    return op


@dataclass(frozen=True)
class Sleepers:
    """Two clients per process."""

    def __call__(self, index: int) -> list[Op]:
        return [sleeper(2), sleeper(2)]


@dataclass(frozen=True)
class FailsIn:
    index: int

    def __call__(self, index: int) -> list[Op]:
        if index == self.index:
            raise ConnectionRefusedError("no store at that port")
        return [sleeper(2)]


def test_threads_count_only_calls_inside_the_window() -> None:
    edges: list[tuple[str, float]] = []
    ops = [sleeper(2) for _ in range(3)]
    stats = run_closed_loop(ops, 0.2, 0.5, lambda e: edges.append((e, time.time())))
    assert [e for e, _ in edges] == ["open", "close"]
    assert 0.45 <= edges[1][1] - edges[0][1] <= 0.8
    calls = sum(len(s.latencies) for s in stats)
    assert 3 * 0.5 / CALL_S * 0.5 <= calls <= 3 * 0.5 / CALL_S
    assert all(CALL_S <= x < 0.2 for s in stats for x in s.latencies)


def test_processes_run_every_client_in_one_window() -> None:
    edges: list[tuple[str, float]] = []
    stats = run_closed_loop_in_processes(Sleepers(), 3, 0.3, 0.6, lambda e: edges.append((e, time.time())))
    assert len(stats) == 6  # two clients in each of three processes
    assert [e for e, _ in edges] == ["open", "close"]
    assert 0.55 <= edges[1][1] - edges[0][1] <= 0.9
    per_client = [len(s.latencies) for s in stats]
    # each client ran inside the window, as many calls as 0.6 s of 5 ms sleeps allow (loosely)
    assert all(0.6 / CALL_S * 0.4 <= n <= 0.6 / CALL_S for n in per_client), per_client
    assert all(s.writes >= len(s.latencies) // 2 for s in stats)


def test_a_process_that_cannot_start_its_clients_fails_the_run_with_its_reason() -> None:
    started = time.monotonic()
    with pytest.raises(BenchError, match="no store at that port"):
        run_closed_loop_in_processes(FailsIn(1), 2, 0.2, 0.5)
    assert time.monotonic() - started < 30  # said at once, not after the set-up timeout
