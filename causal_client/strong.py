"""Strongly consistent registers, Vivace's way (Vivace, USENIX ATC'12, §3): linearizable reads,
writes and read-modify-writes over a majority of the regions, where what crosses the WAN on the
critical path is a timestamp (the links' critical class), and the value stays local or follows
in the background (the bulk class).

Each region holds a replica of every register (services/region/lua/strong.lua); any majority of
them decides. The client runs the phases (Vivace's client library does too):

- **write** (Algorithm 1): the value to the local replica, which stamps it (W-LOCAL; the local
  replica is this region's store, durable); the timestamp alone to every region, done at a
  majority; the value then to the others in the background. First, unless ``clock_safe`` is off,
  the timestamps of a majority (ABD's query), so that the stamp is above every write that ended
  before this one began whatever the regions' clocks say (Vivace relies on synchronized clocks
  instead; one more round trip to the closest majority).
- **read** (Algorithm 1): timestamps from a majority, the greatest is ``mts``; the value written at
  ``mts`` from the first replica that has it (usually the local one); the timestamp written back
  to a majority, skipped when a majority already reported ``mts`` (§3.4), so that no later read
  returns an older value.
- **execute** (Algorithm 3): a promise at a majority for a fresh timestamp (OR-TS: nothing below
  it is stored there any more) with their timestamps; the value at the greatest (OR-DATA); the
  command applied (causal_client/commands.py); the result to the local replica (W-LOCAL); the
  commit of the timestamp at a majority (OW-TS), refused where a greater promise came meanwhile.

Outcomes are never guessed: an operation whose timestamp reached some replicas but not a
majority may still take effect later (a read can find it and write it back), so it raises
``OutcomeUnknown``, never a plain failure; one that reached none raises ``Conflict`` (lost to
concurrent ones) or ``NoQuorum`` (not enough regions answered).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from causal_client import wire
from causal_client.claims import check_part
from causal_client.commands import Command, CommandResult, check_value
from causal_client.errors import CausalError, Conflict, InvalidRequest, NoQuorum, OutcomeUnknown
from causal_client.label import Label
from causal_client.transport import Transport

R = TypeVar("R")
TRIES = 6  # attempts of one operation that loses to concurrent ones before Conflict
BACKOFF_S = 0.005  # the first retry's pause (doubling, with jitter)
NO_PAST = Label.zero()


class Reaches(Protocol):
    """What the registers use of a client (a ``CausalClient`` is one): the regions, the calls'
    timeout, a call at a region over its emulated WAN. Typed so, the registers need not import
    the client, which imports them."""

    timeout: float

    @property
    def regions(self) -> Mapping[str, object]: ...

    def region(self, name: str) -> object: ...

    def call_at(self, region: str, action: Callable[[Transport], R]) -> R: ...


@dataclass(frozen=True, slots=True)
class StrongResult:
    value: str | None  # the register's value (None: never written)
    ts: str  # its timestamp ('' for never written): '<16-digit µs>.<region>'
    label: Label = NO_PAST  # the causal past of the value: its writer's label


@dataclass(frozen=True, slots=True)
class ExecuteResult:
    applied: bool  # the command changed the register
    value: str | None  # the register's value after it
    ts: str  # the timestamp the read-modify-write committed at
    label: Label = NO_PAST  # the value's causal past: the caller's and the value it read


@dataclass(frozen=True, slots=True)
class Stored:
    """What a replica keeps at a timestamp: a value (None: a command left the register empty) and
    its causal past, so that a red operation and the blue ones before it stay causally ordered
    (RedBlue): whoever reads the value first makes that past visible where it reads."""

    value: str | None
    label: Label

    def encode(self) -> str:
        """'<label token>=<value>', or the token alone for no value (a token has no '=')."""
        token = "" if self.label.is_zero else self.label.to_token()
        return token if self.value is None else f"{token}={self.value}"

    @staticmethod
    def decode(stored: str) -> Stored:
        token, equals, value = stored.partition("=")
        return Stored(value if equals else None, Label.from_token(token))


@dataclass(frozen=True, slots=True)
class _TsReply:
    accepted: bool
    stored: str  # the replica's greatest stored timestamp
    here: bool  # whether the replica has the value written at ``stored``


class RegionCalls:
    """What both ways of running strong operations share (this module's and the token's,
    causal_client/token.py): calls at one region paying the emulated WAN, and a call at several
    regions at once, answered as soon as enough answered."""

    def __init__(self, client: Reaches):
        self.client = client
        self.regions = tuple(client.regions)
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    def _gather(
        self, regions: Iterable[str], call: Callable[[str], R], enough: Callable[[dict[str, R]], bool]
    ) -> tuple[dict[str, R], dict[str, str]]:
        """``call`` at every region at once; returns once the answers are ``enough`` (or all are
        done, or the client's timeout passed): the answers so far, and why the failed ones failed."""
        pool = self._executor("critical")
        futures: dict[Future[R], str] = {pool.submit(call, r): r for r in regions}
        answered: dict[str, R] = {}
        failed: dict[str, str] = {}
        pending = set(futures)
        deadline = time.monotonic() + self.client.timeout
        while pending and not enough(answered):
            done, pending = wait(
                pending, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED
            )
            if not done:
                break
            for future in done:
                region = futures[future]
                try:
                    answered[region] = future.result()
                except CausalError as exc:
                    if isinstance(exc, InvalidRequest):
                        raise
                    failed[region] = f"{type(exc).__name__}: {exc}"
        return answered, failed

    def _executor(self, kind: str) -> ThreadPoolExecutor:
        """The threads of one kind of call: "critical" (an operation's phases, waited for) or
        "background" (values following a write). Apart, so that values queued behind a congested
        link never hold up the next operation's phases (they did: a write's tail grew from 0.3 to
        2.6 s under a flood)."""
        with self._lock:
            pool = self._pools.get(kind)
            if pool is None:
                workers = (16 if kind == "critical" else 4) * len(self.regions)
                pool = self._pools[kind] = ThreadPoolExecutor(workers, thread_name_prefix=f"strong-{kind}")
            return pool

    def _pause(self, attempt: int) -> None:
        time.sleep(BACKOFF_S * (2**attempt) * random.uniform(0.5, 1.5))

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.shutdown(wait=False)
            self._pools.clear()


class StrongRegisters(RegionCalls):
    """Runs the phases of strong operations for one client (module doc). ``regions``: where
    every register is replicated; ``local``: the region whose store is the local replica."""

    def __init__(self, client: Reaches, fast_paths: bool = True, clock_safe: bool = True):
        super().__init__(client)
        self.majority = len(self.regions) // 2 + 1
        self.fast_paths = fast_paths  # §3.4: a read skips its write-back under C1 and C2 (a bench: off)
        #: a write first asks a majority for their timestamps and stamps above them (ABD's query),
        #: so that no clock orders it before a write that ended before it began; off: Vivace's
        #: write as published, which relies on synchronized clocks (docs/PROTOCOLS.md, "Clocks")
        self.clock_safe = clock_safe

    # -- the operations --------------------------------------------------------------------------
    def write(self, local: str, namespace: str, key: str, value: str, past: Label | None = None) -> str:
        """Algorithm 1's write; returns the timestamp it took effect at. ``past``: the writer's
        causal past, kept with the value. ``OutcomeUnknown`` if its timestamp reached some
        replicas but not a majority (it may yet take effect)."""
        check_names(namespace, key)
        check_value(value)
        stored = Stored(value, past or NO_PAST)
        floor = ""
        if self.clock_safe:  # every write that ended before this one is stored at one of them
            asked = self._quorum(namespace, key, wire.STRONG_TS, [], "write's timestamp query")
            floor = max(r.stored for r in asked.values())
        for attempt in range(TRIES):
            ts, _ = self._put(local, namespace, key, "", stored, floor)  # W-LOCAL: stamped there
            replies = self._committing(namespace, key, [ts, "w"], "write's timestamp phase")
            if self._settled(replies, "write", namespace, key):
                self._push(local, namespace, key, ts, stored)
                return ts
            floor = max(r.stored for r in replies.values())  # refused under a promise: go above
            self._pause(attempt)
        raise Conflict(f"register {namespace}/{key}: the write lost to read-modify-writes {TRIES} times")

    def read(self, local: str, namespace: str, key: str) -> StrongResult:
        """Algorithm 1's read with §3.4's skipped write-back."""
        check_names(namespace, key)
        for attempt in range(TRIES):
            replies = self._quorum(namespace, key, wire.STRONG_TS, [], "its timestamp phase")
            mts = max(r.stored for r in replies.values())
            if not mts:
                return StrongResult(None, "")
            found = self._data(local, namespace, key, mts, [r for r, x in replies.items() if x.stored == mts])
            result = StrongResult(found.value, mts, found.label)
            settled = sum(x.stored == mts for x in replies.values()) >= self.majority
            if settled and self.fast_paths:  # C1 (C2: the value is mts's)
                return result
            back = self._quorum(
                namespace, key, wire.STRONG_SET_TS, [mts, "w"], "its write-back", accepted=True
            )
            if sum(x.accepted for x in back.values()) >= self.majority:
                return result
            self._pause(attempt)  # a read-modify-write holds a promise above mts: after it
        raise Conflict(f"register {namespace}/{key}: read-modify-writes kept overtaking this read")

    def execute(
        self, local: str, namespace: str, key: str, command: Command, past: Label | None = None
    ) -> ExecuteResult:
        """Algorithm 3. ``past``: the caller's causal past; the result's value keeps it and the
        past of the value it was computed from. ``Conflict`` if it lost to concurrent
        read-modify-writes every time (it did not take effect); ``OutcomeUnknown`` if its commit
        reached a minority."""
        check_names(namespace, key)
        if not isinstance(command, Command):
            raise InvalidRequest(
                f"execute takes a Command (causal_client.commands), not {type(command).__name__}"
            )
        floor = ""
        for attempt in range(TRIES):
            ts = self._stamp(local, namespace, key, floor)
            promises = self._quorum(
                namespace, key, wire.STRONG_SET_TS, [ts, "o"], "its ordering phase", accepted=True
            )
            holders = [r for r, x in promises.items() if x.accepted]
            if len(holders) < self.majority:  # a greater promise or write: go above it
                floor = max(x.stored for x in promises.values())
                self._pause(attempt)
                continue
            mts = max(promises[r].stored for r in holders)
            current = (
                self._data(local, namespace, key, mts, [r for r in holders if promises[r].stored == mts])
                if mts
                else Stored(None, NO_PAST)
            )
            outcome = command.apply(current.value)
            stored = Stored(outcome.value, (past or NO_PAST).merge(current.label))
            self._put(local, namespace, key, ts, stored, "")  # W-LOCAL (unchanged: written too)
            commits = self._committing(namespace, key, [ts, "c"], f"{command.name}'s commit phase")
            if self._settled(commits, command.name, namespace, key):
                self._push(local, namespace, key, ts, stored)
                return ExecuteResult(outcome.applied, outcome.value, ts, stored.label)
            self._pause(attempt)
        raise Conflict(f"register {namespace}/{key}: {command.name} lost to concurrent ones {TRIES} times")

    def _settled(self, replies: dict[str, _TsReply], what: str, namespace: str, key: str) -> bool:
        """Whether a phase that stores a timestamp took effect (a majority accepted it: True) or
        surely did not (every region refused it: False, and the operation may run again with
        another timestamp). Anything between, accepted somewhere or unanswered somewhere, may
        still take effect: trying again with another timestamp could make it happen twice."""
        accepted = sum(r.accepted for r in replies.values())
        if accepted >= self.majority:
            return True
        if accepted == 0 and len(replies) == len(self.regions):
            return False
        raise OutcomeUnknown(
            f"register {namespace}/{key}: the {what} was accepted at {accepted} of {len(self.regions)} "
            f"regions ({len(self.regions) - len(replies)} did not answer) before a concurrent read-modify-"
            "write overtook it: it may or may not take effect (read the register to know)"
        )

    # -- phases ----------------------------------------------------------------------------------
    def _call(self, region: str, namespace: str, key: str, function: str, args: list, meta: bool) -> Any:
        """One call at one replica, paying the emulated WAN each way (as a session's calls): the
        gear's reply (a list, or for a stamp a string)."""
        return self.client.call_at(
            region, lambda t: t.register_call(region, namespace, key, function, args, meta)
        )

    def _put(
        self, region: str, namespace: str, key: str, ts: str, stored: Stored, floor: str
    ) -> tuple[str, bool]:
        """Stores a value at ``ts`` ('': a fresh stamp above ``floor``) at one replica."""
        args = [ts, stored.encode(), floor]
        ts_text, stored = self._call(region, namespace, key, wire.STRONG_PUT, args, meta=False)
        return text_of(ts_text), stored == 1

    def _committing(self, namespace: str, key: str, args: list, what: str) -> dict[str, _TsReply]:
        """A phase that stores a timestamp: one that could not reach a majority may still land
        where it was sent, so its operation's outcome is unknown, not failed."""
        try:
            return self._quorum(namespace, key, wire.STRONG_SET_TS, args, what, accepted=True)
        except NoQuorum as exc:
            raise OutcomeUnknown(f"{exc}; it may or may not take effect (read the register to know)") from exc

    def _quorum(
        self, namespace: str, key: str, function: str, args: list, what: str, accepted: bool = False
    ) -> dict[str, _TsReply]:
        """The phase at every replica (in the critical class) until a majority answered (with
        ``accepted``: a majority accepted, or too many refused for that); ``NoQuorum`` naming the
        silent ones if fewer than a majority answered within the client's timeout."""

        def one(region: str) -> _TsReply:
            reply = self._call(region, namespace, key, function, args, meta=True)
            if function == wire.STRONG_TS:
                return _TsReply(True, text_of(reply[0]), reply[1] == 1)
            return _TsReply(reply[0] == 1, text_of(reply[1]), reply[2] == 1)

        def enough(answers: dict[str, _TsReply]) -> bool:
            if not accepted:
                return len(answers) >= self.majority
            # refused by too many: every answer is still awaited (whether it landed is the question)
            return sum(a.accepted for a in answers.values()) >= self.majority

        answered, failed = self._gather(self.regions, one, enough)
        if len(answered) < self.majority:
            silent = tuple(r for r in self.regions if r not in answered)
            why = "; ".join(f"{r}: {failed[r]}" for r in silent if r in failed) or "no answer in time"
            raise NoQuorum(
                f"register {namespace}/{key}: {what} reached {len(answered)} of {len(self.regions)} regions, "
                f"a majority is {self.majority}; not answering: {', '.join(silent)} ({why})",
                missing=silent,
            )
        return answered

    def _data(self, local: str, namespace: str, key: str, ts: str, holders: list[str]) -> Stored:
        """The value written at ``ts``: the local replica first, then those that reported it, then
        any (it travels in the background), until the client's timeout."""
        deadline = time.monotonic() + self.client.timeout
        order = [local] + [r for r in holders if r != local]
        order += [r for r in self.regions if r not in order]
        while True:
            for region in order:
                try:
                    found = self._call(region, namespace, key, wire.STRONG_DATA, [ts], meta=False)
                except CausalError:
                    continue
                if found:
                    return Stored.decode(text_of(found[0]))
            if time.monotonic() > deadline:
                raise NoQuorum(
                    f"register {namespace}/{key}: no answering region has the value written at {ts} "
                    "(it is at its writer's region, which does not answer)",
                    missing=tuple(holders),
                )
            time.sleep(0.01)

    def _push(self, local: str, namespace: str, key: str, ts: str, stored: Stored) -> None:
        """The value to the other replicas, in the background (the bulk class): a read there then
        finds it locally."""
        pool = self._executor("background")
        for region in self.regions:
            if region != local:
                pool.submit(self._quietly, region, namespace, key, ts, stored)

    def _quietly(self, region: str, namespace: str, key: str, ts: str, stored: Stored) -> None:
        with contextlib.suppress(CausalError):  # the value stays at its writer's region, for readers
            self._put(region, namespace, key, ts, stored, "")

    def _stamp(self, local: str, namespace: str, key: str, floor: str) -> str:
        """A timestamp for a read-modify-write, from the local replica: unique (a client's clock
        could give a write of this region the same one, and two values one timestamp), above
        ``floor``."""
        return text_of(self._call(local, namespace, key, wire.STRONG_STAMP, [floor], meta=False))


def check_names(namespace: str, key: str) -> None:
    for what, value in (("register namespace", namespace), ("register key", key)):
        problem = check_part(what, value)
        if problem:
            raise InvalidRequest(f"{problem}, got {value!r}")


def text_of(value: bytes | str) -> str:
    """A gear's reply part as text (redis-py gives bytes)."""
    return value.decode() if isinstance(value, bytes) else value


__all__ = ["CommandResult", "ExecuteResult", "StrongRegisters", "StrongResult"]


class Executes(Protocol):
    """What ``execute_settled`` needs of a session (a ``Session`` is one)."""

    def execute(self, namespace: str, key: str, command: Command) -> ExecuteResult: ...


def execute_settled(
    session: Executes, namespace: str, key: str, command: Command, tries: int = 3
) -> ExecuteResult:
    """``session.execute`` of a command whose new value nobody else writes (an insert-if-absent
    or a compare-and-set of a fresh id or a holder's token), so that sending it again tells what
    the first did. A commit cut short (``OutcomeUnknown``: it reached some replicas, and may yet
    take effect) is settled so: the register then holds that value if either try took effect
    (the second finds it, or writes it above the first's timestamp, which can never surface
    again), or another's if a concurrent one won. ``OutcomeUnknown`` if no try settled it in
    ``tries``; ``Conflict`` only while no try was cut short (nothing happened)."""
    unknown: OutcomeUnknown | None = None
    for _ in range(tries):
        try:
            return session.execute(namespace, key, command)
        except OutcomeUnknown as exc:
            unknown = exc
        except Conflict:
            if unknown is None:
                raise
    assert unknown is not None
    raise unknown
