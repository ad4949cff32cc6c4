"""Histories made without a cluster, of any length, for measuring and testing the checkers
(``bench checker``, tests/test_check_causal.py): an in-memory store of a few regions that
applies remote writes in causal order (``causal=True``: each write carries the vector of what its
region had applied, and a region applies it only once it has applied as much), or in any order
(``causal=False``, like ``eventual``: a region applies whatever came first, so a reader can see
a reply before the tweet it answers, and the causal checker must say so).

Sessions stay in their region, so a causally delivering store gives causally consistent
histories; strong histories come from one atomic register per key whose operations take effect
at a random instant between their call and return (linearizable by construction).
"""

from __future__ import annotations

import heapq
import random

from causal_client.commands import CommandResult, CompareAndSet
from loadtest.check.history import Kind, Op, Outcome
from loadtest.check.linearizable import EXECUTE, READ, WRITE, StrongOp

_TICK = 1e-4  # simulated seconds per operation


class _Region:
    """One region's store (last writer wins by the writes' order of issue) and what is on its
    way to it."""

    __slots__ = ("applied", "arriving", "pending", "store")

    def __init__(self, regions: int) -> None:
        self.store: dict[tuple[str, str], tuple[int, str]] = {}  # key → (issued as, value)
        self.applied = [0] * regions  # writes applied per origin region (in that origin's order)
        self.arriving: list[tuple[float, int, int, tuple[str, str], str, tuple[int, ...], int]] = []
        self.pending: list[dict[int, tuple[tuple[str, str], str, tuple[int, ...], int]]] = [
            {} for _ in range(regions)
        ]  # per origin: arrived, not yet applied, by the origin's sequence number

    def put(self, key: tuple[str, str], value: str, issued: int) -> None:
        if issued > self.store.get(key, (-1, ""))[0]:
            self.store[key] = (issued, value)


def causal_history(
    ops: int,
    *,
    sessions: int = 16,
    regions: int = 3,
    keys: int = 48,
    write_share: float = 0.4,
    mean_lag: float = 50.0,
    causal: bool = True,
    seed: int = 1,
) -> list[Op]:
    """``ops`` operations of ``sessions`` sessions over ``keys`` keys (one group); a write
    reaches each other region after a random lag (exponential, ``mean_lag`` operations)."""
    rng = random.Random(seed)
    places = [_Region(regions) for _ in range(regions)]
    key_names = [("g", f"k{i}") for i in range(keys)]
    counts = [0] * sessions
    history: list[Op] = []
    for n in range(ops):
        for place in places:
            if place.arriving and place.arriving[0][0] <= n:
                _deliver(place, n, causal)
        session = rng.randrange(sessions)
        home = session % regions
        region = places[home]
        counts[session] += 1
        key = rng.choice(key_names)
        at = n * _TICK
        if rng.random() < write_share:
            value = f"{session}.{counts[session]}"
            region.put(key, value, n)
            region.applied[home] += 1
            deps = tuple(region.applied)
            for other, place in enumerate(places):
                if other != home:
                    arrival = n + rng.expovariate(1 / mean_lag)
                    heapq.heappush(place.arriving, (arrival, home, region.applied[home], key, value, deps, n))
            kind: Kind = Kind.WRITE
            seen: str | None = value
        else:
            kind = Kind.READ
            seen = region.store[key][1] if key in region.store else None
        history.append(
            Op(n, session, counts[session], kind, key, seen, Outcome.OK, str(home), at, at + _TICK / 2)
        )
    return history


def _deliver(place: _Region, now: int, causal: bool) -> None:
    """Applies what has arrived at ``place``: at once (eventually), or once everything it depends
    on has been applied here (causally)."""
    while place.arriving and place.arriving[0][0] <= now:
        _, origin, sequence, key, value, deps, issued = heapq.heappop(place.arriving)
        if not causal:
            place.put(key, value, issued)
            continue
        place.pending[origin][sequence] = (key, value, deps, issued)
    if not causal:
        return
    progress = True
    while progress:
        progress = False
        for origin, waiting in enumerate(place.pending):
            while (sequence := place.applied[origin] + 1) in waiting:
                key, value, deps, issued = waiting[sequence]
                if any(place.applied[o] < d for o, d in enumerate(deps) if o != origin):
                    break
                del waiting[sequence]
                place.put(key, value, issued)
                place.applied[origin] = sequence
                progress = True


def linearizable_history(
    ops: int, *, sessions: int = 8, keys: int = 4, overlap: float = 3.0, seed: int = 1
) -> list[StrongOp]:
    """``ops`` strong operations (writes, reads, compare-and-sets) on ``keys`` registers; each
    takes effect at a random instant of its interval, so about ``overlap`` others of its key run
    beside it."""
    rng = random.Random(seed)
    planned = []  # (effect instant, id, session, key, kind, arg, start, end)
    clocks = [0.0] * sessions
    written: dict[str, str] = {}  # key → the last value planned for it (what a CAS expects)
    for n in range(ops):
        session = rng.randrange(sessions)
        key = f"r{rng.randrange(keys)}"
        start = clocks[session] + rng.random() * 0.2
        end = start + 0.1 + rng.random() * overlap * 0.2
        clocks[session] = end
        roll = rng.random()
        kind = WRITE if roll < 0.35 else READ if roll < 0.7 else EXECUTE
        value = f"s{session}.{n}"
        arg = value if kind == WRITE else CompareAndSet(written.get(key), value) if kind == EXECUTE else None
        if kind != READ:
            written[key] = value
        planned.append((rng.uniform(start, end), n, session, key, kind, arg, start, end))
    registers: dict[str, str | None] = {}
    history: list[StrongOp] = []
    for _, n, session, key, kind, arg, start, end in sorted(planned):
        current = registers.get(key)
        result: str | CommandResult | None
        if kind == WRITE:
            registers[key], result = arg, None  # type: ignore[assignment]
        elif kind == READ:
            result = current
        else:
            assert isinstance(arg, CompareAndSet)
            result = arg.apply(current)
            registers[key] = result.value
        history.append(StrongOp(n, session, key, kind, arg, result, start, end))
    history.sort(key=lambda op: op.id)
    return history
