"""The closed-loop runner: a fixed number of clients, one request in flight each, measured only
inside a window after a warm-up, so that connection set-up and the ramp are not in the figures."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis

from causal_client import CausalError
from loadtest.harness.results import PhaseResult
from loadtest.harness.stats import percentile, to_ms

ERROR_PAUSE_S = 0.01

Op = Callable[[], bool]  # one operation; returns True when it was a write


@dataclass
class ThreadStats:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    writes: int = 0
    first_error: str | None = None


def closed_loop_client(
    op: Op, mine: ThreadStats, begin: float, end: float, stop: threading.Event, clock: Callable[[], float]
) -> None:
    """One closed-loop client: ``op`` back to back until the window ``[begin, end]`` closes,
    counting only the calls that start and finish inside it."""
    while not stop.is_set():
        started = clock()
        try:
            wrote = op()
        except (CausalError, redis.RedisError) as exc:
            mine.errors += started >= begin
            mine.first_error = mine.first_error or f"{type(exc).__name__}: {exc}"
            time.sleep(ERROR_PAUSE_S)  # a failing region is not hammered in a tight loop
            continue
        finished = clock()
        mine.writes += wrote
        if started >= begin and finished <= end:
            mine.latencies.append(finished - started)
        if finished >= end:
            return


def run_closed_loop(
    ops: Sequence[Op], warmup: float, duration: float, at_edge: Callable[[str], None] | None = None
) -> list[ThreadStats]:
    """Runs each op back to back in its own thread (a closed loop: one request in flight per
    client, as in the paper), for ``warmup`` unmeasured seconds then ``duration`` measured ones.

    Only operations that start and finish inside the measured window count, so the figures do
    not include connection set-up or the ramp. ``at_edge("open")`` and ``at_edge("close")`` are
    called when the window opens and closes (to read counters over the same window)."""
    stats = [ThreadStats() for _ in ops]
    window = [0.0, 0.0]
    stop = threading.Event()

    def open_window() -> None:
        window[0] = time.perf_counter() + warmup
        window[1] = window[0] + duration

    barrier = threading.Barrier(len(ops) + 1, action=open_window)

    def loop(op: Op, mine: ThreadStats) -> None:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return  # interrupted before the start
        closed_loop_client(op, mine, window[0], window[1], stop, time.perf_counter)

    threads = [
        threading.Thread(target=loop, args=(op, mine), daemon=True, name=f"bench-client-{i}")
        for i, (op, mine) in enumerate(zip(ops, stats, strict=True))
    ]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
        for edge, at in (("open", window[0]), ("close", window[1])):
            while time.perf_counter() < at:
                time.sleep(min(0.2, max(0.0, at - time.perf_counter())))
            if at_edge is not None:
                at_edge(edge)
    finally:
        stop.set()  # on Ctrl-C too: clients finish their current call and exit
        barrier.abort()
        for thread in threads:
            thread.join(timeout=15)
    return stats


def paced(op: Op, per_second: float, rng: random.Random) -> Op:
    """``op`` at most ``per_second`` times a second, evenly spaced, the first at a random phase
    (clients that start together do not call together). Below the system's capacity a paced
    client's rate is the offered load, as the paper's "as many clients as reach capacity without
    overloading it"; one that falls behind does not burst to catch up."""
    interval = 1.0 / per_second
    due = [time.perf_counter() + rng.uniform(0, interval)]

    def op_on_time() -> bool:
        wait = due[0] - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        due[0] = max(due[0] + interval, time.perf_counter())
        return op()

    return op_on_time


def summarize(system: str, op: str, stats: list[ThreadStats], seconds: float) -> PhaseResult:
    """The clients' samples pooled into one phase's figures."""
    latencies = sorted(x for s in stats for x in s.latencies)
    errors = [s.first_error for s in stats if s.first_error]
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    return PhaseResult(
        system=system,
        op=op,
        clients=len(stats),
        seconds=seconds,
        ops=len(latencies),
        errors=sum(s.errors for s in stats),
        ops_per_s=len(latencies) / seconds,
        mean_ms=1000 * sum(latencies) / len(latencies) if latencies else None,
        p50_ms=to_ms(p50),
        p99_ms=to_ms(p99),
        writes_issued=sum(s.writes for s in stats),
        first_error=errors[0] if errors else None,
    )
