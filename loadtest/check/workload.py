"""The sessions of a checked run: threads that read and write a few hot keys per group with values
unique across the run (so read-from dependencies chain across regions), move between regions
(migrations, resumes from their token elsewhere, touching groups not replicated where they are),
and keep going through faults, recording everything in a History.

Each session is one logical client: when it resumes from its token at another region, or fails
over after its region stopped answering, it stays the same session in the history, whose causal
past must come along.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from causal_client import (
    CausalClient,
    CausalError,
    InvalidRequest,
    Mutation,
    ReadSpec,
    RegionUnavailable,
    Session,
    StoreFull,
    StoreTimeout,
)
from loadtest.check.history import Failure, History, Kind, Outcome

VALUE_COLUMN = "v"
#: Every write also sets a column of its own (named by its unique value) in the same update, so
#: that after the run every acknowledged write can be looked for at every replica, not only the
#: last-writer-wins one: a write lost behind a later write of the same key would not show in
#: the value column.
LOG_PREFIX = "w:"
COUNTER_ROW, COUNTER_COLUMN = "counter", "n"
FAILOVER_TIMEOUT_S = 3.0  # a move away from a region that stopped answering waits at most this
PAUSE_AFTER_ERROR_S = 0.05


@dataclass(frozen=True)
class Mix:
    """Shares of each action (they need not sum to 1; they are weights)."""

    read: float = 0.45
    write: float = 0.27
    increment: float = 0.04
    migrate: float = 0.03
    resume: float = 0.04
    batch: float = 0.07  # an atomic batch of 2-3 keys (a write-only transaction)
    multi_read: float = 0.10  # 2-4 keys in one read-only transaction
    think_s: float = 0.0
    atomic: bool = True  # False: batches with atomic=False (the atomicity check must catch them)

    def actions(self) -> tuple[list[str], list[float]]:
        names = ["read", "write", "increment", "migrate", "resume", "batch", "multi_read"]
        return names, [getattr(self, name) for name in names]


def log_column(value: str) -> str:
    """The column a write of ``value`` sets beside the value column (LOG_PREFIX)."""
    return LOG_PREFIX + value


def hot_keys(groups: list[str], per_group: int, run: str = "") -> list[tuple[str, str]]:
    """The rows a run reads and writes; ``run`` names them apart from an earlier run's on the
    same deployment (whose values would read as written by no one, its counters as doubled)."""
    return [(group, f"{run}k{i}") for group in groups for i in range(per_group)]


def counter_row(keys: list[tuple[str, str]]) -> str:
    """The row whose counter column the run increments, named like its hot keys."""
    return (keys[0][1].rpartition("k")[0] if keys else "") + COUNTER_ROW


class CheckedSession(threading.Thread):
    """One client session doing random actions until ``stop`` is set."""

    def __init__(
        self,
        number: int,
        client: CausalClient,
        home: str,
        keys: list[tuple[str, str]],
        history: History,
        clock: float,
        stop: threading.Event,
        mix: Mix,
        seed: int,
    ):
        super().__init__(name=f"session-{number}", daemon=True)
        self.number, self.client, self.home, self.keys = number, client, home, keys
        self.history, self.clock, self.stop, self.mix = history, clock, stop, mix
        self.rng = random.Random(seed)
        self.regions = list(client.regions)
        self.groups = sorted({group for group, _ in keys})
        self.counter_row = counter_row(keys)
        self.index = 0  # acknowledged operations so far (the session's order)
        self.written = 0
        self.session: Session | None = None

    def now(self) -> float:
        return time.monotonic() - self.clock

    def run(self) -> None:
        names, weights = self.mix.actions()
        while not self.stop.is_set():
            try:
                if self.session is None:
                    self.session = self.client.session(self.home)
                action = self.rng.choices(names, weights)[0]
                getattr(self, action)()
            except Exception as exc:  # (an untyped one is a client bug: failed() records it)
                self.failed("session", exc)
            if self.mix.think_s:
                time.sleep(self.mix.think_s)

    # -- actions -----------------------------------------------------------------------------
    def record(self, kind: Kind, key: tuple[str, str], value: str | None, outcome: Outcome,
               region: str, started: float, label=None, txn: int | None = None) -> None:  # fmt: skip
        """One operation in the history; an acknowledged one takes the next place in the
        session's order, one of unknown outcome hangs off the last (see history.py)."""
        if outcome == Outcome.OK:
            self.index += 1
        self.history.add(
            session=self.number, index=self.index, kind=kind, key=key, value=value, outcome=outcome,
            region=region, start=started, end=self.now(), label=label, txn=txn,
        )  # fmt: skip

    def local_keys(self, count: int) -> list[tuple[str, str]]:
        """``count`` distinct hot keys (fewer if there are fewer) of groups replicated where the
        session is, so that a transaction over them needs no migration."""
        here = self.session.region  # type: ignore[union-attr]
        local = [k for k in self.keys if here in self.client.replicas(k[0])]
        return self.rng.sample(local, min(count, len(local)))

    def batch(self) -> None:
        keys = self.local_keys(self.rng.randint(2, 3))
        if not keys:
            return
        txn = self.history.new_txn()
        values = []
        for _ in keys:
            self.written += 1
            values.append(f"{self.number}.{self.written}")
        mutations = [
            Mutation(g, r).set(VALUE_COLUMN, v).set(log_column(v), "")
            for (g, r), v in zip(keys, values, strict=True)
        ]
        started = self.now()
        region = self.session.region  # type: ignore[union-attr]
        try:
            label = self.session.batch(mutations, atomic=self.mix.atomic)  # type: ignore[union-attr]
        except InvalidRequest:
            raise
        except Exception as exc:
            for key, value in zip(keys, values, strict=True):
                self.record(Kind.WRITE, key, value, Outcome.UNKNOWN, region, started, txn=txn)
            self.failed(f"batch {len(keys)} keys", exc)
            return
        region = self.session.region  # type: ignore[union-attr]
        for key, value in zip(keys, values, strict=True):
            # atomic: one label for all; else each row its own, which the session did not learn
            own = (label.ts, label.src) if self.mix.atomic else None
            self.record(Kind.WRITE, key, value, Outcome.OK, region, started, own, txn=txn)

    def multi_read(self) -> None:
        keys = self.local_keys(self.rng.randint(2, 4))
        if not keys:
            return
        started = self.now()
        try:
            rows = self.session.multi_read([ReadSpec(g, r, (VALUE_COLUMN,)) for g, r in keys])  # type: ignore[union-attr]
        except Exception as exc:
            self.failed(f"multi-read {len(keys)} keys", exc)
            return
        txn = self.history.new_txn()
        for key, row in zip(keys, rows, strict=True):
            cell = row.cell(VALUE_COLUMN)
            self.record(Kind.READ, key, row.text(VALUE_COLUMN), Outcome.OK, self.session.region,  # type: ignore[union-attr]
                        started, (cell.label.ts, cell.label.src) if cell else None, txn=txn)  # fmt: skip

    def read(self) -> None:
        group, row = self.rng.choice(self.keys)
        started = self.now()
        try:
            cell = self.session.read(group, row, [VALUE_COLUMN]).cell(VALUE_COLUMN)  # type: ignore[union-attr]
        except Exception as exc:
            self.failed(f"read {group}/{row}", exc)
            return
        value, label = (cell.text, (cell.label.ts, cell.label.src)) if cell else (None, None)
        self.record(Kind.READ, (group, row), value, Outcome.OK, self.session.region, started, label)  # type: ignore[union-attr]

    def write(self) -> None:
        group, row = self.rng.choice(self.keys)
        self.written += 1
        value = f"{self.number}.{self.written}"
        started = self.now()
        region = self.session.region  # type: ignore[union-attr]
        try:
            label = self.session.write(group, row, {VALUE_COLUMN: value, log_column(value): ""})  # type: ignore[union-attr]
        except InvalidRequest:
            raise  # a bug of the workload: nothing may be recorded about it
        except StoreFull as exc:  # refused before it ran: not written (a read of it would be thin air)
            self.failed(f"write {group}/{row}", exc)
            return
        except Exception as exc:  # applied or not: unknown (the store may have died mid-call)
            self.record(Kind.WRITE, (group, row), value, Outcome.UNKNOWN, region, started)
            self.failed(f"write {group}/{row}", exc)
            return
        # where it was applied: an auto-migration (group not replicated here) may have moved it
        region = self.session.region  # type: ignore[union-attr]
        self.record(Kind.WRITE, (group, row), value, Outcome.OK, region, started, (label.ts, label.src))

    def increment(self) -> None:
        group = self.rng.choice(self.groups)
        try:
            self.session.increment(group, self.counter_row, COUNTER_COLUMN, 1)  # type: ignore[union-attr]
        except Exception as exc:
            self.history.counted(group, Outcome.UNKNOWN)
            self.failed(f"increment {group}", exc)
            return
        self.history.counted(group, Outcome.OK)

    def migrate(self) -> None:
        target = self.rng.choice([r for r in self.regions if r != self.session.region])  # type: ignore[union-attr]
        try:
            self.session.migrate(target)  # type: ignore[union-attr]
        except Exception as exc:
            self.failed(f"migrate to {target}", exc, target)

    def resume(self) -> None:
        """As a web app resumes a cookie: from the token, at another region, in a new object."""
        target = self.rng.choice(self.regions)
        try:
            self.session = self.client.session(target, label=self.session.token)  # type: ignore[union-attr]
        except Exception as exc:
            self.failed(f"resume at {target}", exc, target)

    # -- faults ------------------------------------------------------------------------------
    def failed(self, what: str, exc: Exception, called: str | None = None) -> None:
        """A failed call to ``called`` (default: the session's region). An error that is not a
        ``CausalError`` is recorded as such (a client bug), and the session goes on as a caller
        would after any failure."""
        here = self.session.region if self.session is not None else self.home
        if not isinstance(exc, CausalError):
            self.history.untyped_error(self.number, what, exc)
        self.history.failed(Failure(self.number, what, called or here, type(exc).__name__, self.now()))
        if isinstance(exc, RegionUnavailable | StoreTimeout) and self.session is not None and called is None:
            self.fail_over(here)
        else:
            time.sleep(PAUSE_AFTER_ERROR_S)

    def fail_over(self, down: str) -> None:
        """Its region does not answer: half the time it waits for it, half the time it moves
        on (the past must follow, by stabilization when the region that holds it is down)."""
        if self.rng.random() < 0.5:
            time.sleep(0.2)
            return
        target = self.rng.choice([r for r in self.regions if r != down])
        try:
            self.session.migrate(target, timeout=FAILOVER_TIMEOUT_S)  # type: ignore[union-attr]
        except Exception as exc:
            if not isinstance(exc, CausalError):
                self.history.untyped_error(self.number, f"fail over to {target}", exc)
            self.history.failed(
                Failure(self.number, f"fail over to {target}", down, type(exc).__name__, self.now())
            )
            time.sleep(0.2)
