"""The closed loop spread over several client processes, for machines where one Python process
of clients would be the bottleneck.

Threads of one process share its interpreter lock, so a closed loop in threads offers at most
about one core's worth of client work: on 2 cores that is as much as the cluster can take, on 16
it is not, and both protocols would then read the clients' ceiling, not their own. Here each
process builds its own share of the clients (its own connections: spawned processes share
nothing), all of them wait for one another, and one window on the machine's monotonic clock
(``CLOCK_MONOTONIC``, the same in every process) is measured by all, as ``run_closed_loop`` does
in one process.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from loadtest.harness.experiment import BenchError
from loadtest.harness.loop import Op, ThreadStats, closed_loop_client

# A factory of one process's clients, called in that process with its index; it must pickle
# (a module-level class or function), since the processes are spawned, not forked.
OpsFactory = Callable[[int], Sequence[Op]]

SETUP_TIMEOUT_S = 120.0  # every process connected and ready, or the run fails
RESULT_SLACK_S = 60.0  # after the window closes, for the last calls and the stats to come back


def run_closed_loop_in_processes(
    factory: OpsFactory,
    processes: int,
    warmup: float,
    duration: float,
    at_edge: Callable[[str], None] | None = None,
) -> list[ThreadStats]:
    """``run_closed_loop`` over ``processes`` spawned processes, each running the clients that
    ``factory(index)`` builds in threads of its own; every client's stats, process by process."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Barrier(processes + 1, timeout=SETUP_TIMEOUT_S)
    go = ctx.Barrier(processes + 1, timeout=SETUP_TIMEOUT_S)
    opens_at = ctx.Value("d", 0.0)
    results: Any = ctx.Queue()
    workers = [
        ctx.Process(
            target=_worker,
            args=(factory, index, ready, go, opens_at, duration, results),
            daemon=True,
            name=f"bench-clients-{index}",
        )
        for index in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        try:
            ready.wait()
        except threading.BrokenBarrierError:
            raise BenchError(f"client processes did not start: {_first_error(results)}") from None
        opens_at.value = time.monotonic() + warmup
        go.wait()
        for edge, at in (("open", opens_at.value), ("close", opens_at.value + duration)):
            while time.monotonic() < at:
                time.sleep(min(0.2, max(0.0, at - time.monotonic())))
            if at_edge is not None:
                at_edge(edge)
        by_index: dict[int, list[ThreadStats]] = {}
        while len(by_index) < processes:
            try:
                index, stats, error = results.get(timeout=RESULT_SLACK_S)
            except queue.Empty:
                raise BenchError(f"client processes sent no result within {RESULT_SLACK_S:g} s") from None
            if error:
                raise BenchError(f"client process {index} failed: {error}")
            by_index[index] = stats
        return [s for index in sorted(by_index) for s in by_index[index]]
    finally:
        ready.abort()
        go.abort()
        for worker in workers:
            worker.join(timeout=15)
            if worker.is_alive():
                worker.terminate()


def _first_error(results: Any) -> str:
    try:
        _, _, error = results.get(timeout=1.0)
    except queue.Empty:
        return "no process said why (timed out waiting for them)"
    return error or "unknown"


def _worker(
    factory: OpsFactory,
    index: int,
    ready: Any,
    go: Any,
    opens_at: Any,
    duration: float,
    results: Any,
) -> None:
    try:
        ops = factory(index)
    except Exception as exc:  # sent to the parent, which says which process and why
        results.put((index, None, f"{type(exc).__name__}: {exc}"))
        ready.abort()
        return
    try:
        ready.wait()
        go.wait()
    except threading.BrokenBarrierError:
        return  # another process failed, or the parent gave up
    begin = opens_at.value
    stats = [ThreadStats() for _ in ops]
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=closed_loop_client,
            args=(op, mine, begin, begin + duration, stop, time.monotonic),
            daemon=True,
            name=f"bench-client-{index}-{i}",
        )
        for i, (op, mine) in enumerate(zip(ops, stats, strict=True))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put((index, stats, None))
