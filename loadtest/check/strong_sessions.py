"""Strong operations in a checked run: sessions that write, read and compare-and-set a few
registers (causal_client/strong.py) from their region while the nemesis works, recording every
operation with its call and return times for the linearizability check
(loadtest/check/linearizable.py).

A write or read-modify-write whose outcome is unknown is recorded as such (it may or may not take
effect); one that lost to concurrent ones (``Conflict``) or never reached a majority's promise
(``NoQuorum``) did not happen. A read that failed constrains nothing. After the run, with every
fault healed, each register is read once more from every region: a write that was acknowledged
and then lost would make those reads unexplainable, so "nothing lost" is part of the same check.
"""

from __future__ import annotations

import gzip
import itertools
import pickle
import random
import threading
import time
from pathlib import Path

from causal_client import CausalClient, CausalError, CompareAndSet, Conflict, NoQuorum, OutcomeUnknown
from causal_client.commands import CommandResult
from loadtest.check.linearizable import EXECUTE, READ, WRITE, StrongOp

NAMESPACE = "check"
PAUSE_AFTER_ERROR_S = 0.05


class StrongHistory:
    """The strong operations of a run, appended from many threads."""

    def __init__(self) -> None:
        self.ops: list[StrongOp] = []
        self.failures = 0
        self.untyped: list[str] = []  # errors that are not a CausalError (as History.untyped)
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def add(self, session: int, key: str, kind: str, arg, result, start: float, end: float | None) -> None:
        with self._lock:
            self.ops.append(StrongOp(next(self._ids), session, key, kind, arg, result, start, end))


def register_keys(count: int, run: str) -> list[str]:
    return [f"{run}r{i}" for i in range(count)]


class StrongSession(threading.Thread):
    """Random strong operations from one region until ``stop``; moves to the next region after
    its own stops answering."""

    def __init__(
        self,
        number: int,
        client: CausalClient,
        regions: list[str],
        keys: list[str],
        history: StrongHistory,
        clock: float,
        stop: threading.Event,
        seed: int,
    ):
        super().__init__(name=f"strong-{number}", daemon=True)
        self.number, self.client, self.regions, self.keys = number, client, regions, keys
        self.region = regions[number % len(regions)]
        self.history, self.clock, self.stop = history, clock, stop
        self.rng = random.Random(seed)
        self.seen: dict[str, str | None] = {}  # key → the last value this session saw there
        self.n = 0

    def now(self) -> float:
        return time.monotonic() - self.clock

    def run(self) -> None:
        while not self.stop.is_set():
            self.one()

    def one(self) -> None:
        key, roll = self.rng.choice(self.keys), self.rng.random()
        self.n += 1
        value = f"s{self.number}.{self.n}"
        kind = WRITE if roll < 0.35 else READ if roll < 0.7 else EXECUTE
        arg = (
            value if kind == WRITE else CompareAndSet(self.seen.get(key), value) if kind == EXECUTE else None
        )
        start = self.now()
        result: str | CommandResult | None
        try:
            session = self.client.session(self.region)  # attaching there fails while it is down
            if kind == WRITE:
                session.strong_write(NAMESPACE, key, value)
                result = None
            elif kind == READ:
                result = self.seen[key] = session.strong_read(NAMESPACE, key).value
            else:
                done = session.execute(NAMESPACE, key, arg)  # type: ignore[arg-type]
                result, self.seen[key] = CommandResult(done.applied, done.value), done.value
            self.history.add(self.number, key, kind, arg, result, start, self.now())
        except OutcomeUnknown:
            if kind != READ:  # it may or may not take effect
                self.history.add(self.number, key, kind, arg, None, start, None)
            self.stop.wait(PAUSE_AFTER_ERROR_S)  # as a caller would before it reads to know
        except (Conflict, NoQuorum):
            pass  # did not take effect (a read that failed constrains nothing)
        except Exception as exc:  # its region does not answer: the session goes on from the next one
            if not isinstance(exc, CausalError):  # a client bug; the outcome is unknown
                what = f"strong session {self.number}: {kind}: {type(exc).__name__}: {exc}"
                self.history.untyped.append(what)
                if kind != READ:
                    self.history.add(self.number, key, kind, arg, None, start, None)
            self.history.failures += 1
            self.region = self.regions[(self.regions.index(self.region) + 1) % len(self.regions)]
            self.stop.wait(PAUSE_AFTER_ERROR_S)


def final_reads(
    client: CausalClient, regions: list[str], keys: list[str], history: StrongHistory, clock: float
) -> None:
    """Every register read from every region after the run: acknowledged writes must be there."""
    for region in regions:
        session = client.session(region)
        for key in keys:
            start = time.monotonic() - clock
            value = session.strong_read(NAMESPACE, key).value
            history.add(-1, key, READ, None, value, start, time.monotonic() - clock)


def strong_history_path(causal_history: Path) -> Path:
    """Where a run's strong operations are kept beside its causal history (``NNN-….jsonl.gz``)."""
    return causal_history.with_name(causal_history.name.removesuffix(".jsonl.gz") + ".strong.pickle.gz")


def write_strong_ops(path: Path, ops: list[StrongOp]) -> None:
    """The strong operations as recorded (commands and results included), so that a run's
    linearizability can be checked again (``read_strong_ops``, then ``check_linearizable``)."""
    with gzip.open(path, "wb", compresslevel=3) as out:
        pickle.dump(list(ops), out)


def read_strong_ops(path: Path) -> list[StrongOp]:
    with gzip.open(path, "rb") as source:
        return pickle.load(source)
