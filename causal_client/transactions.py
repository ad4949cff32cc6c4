"""Read-only and write-only transactions over a region's shards (Eiger's, NSDI'13 §4-§5), as plans:
generators that yield rounds of gear calls (one per shard, run in parallel) and take their
replies, so that the client library (over redis-py) and the region's frontend (asyncio) run the
same algorithm (``run_sync`` / the frontend's driver).

Time is each shard's clock (the gears' ``last_ts``, hybrid microseconds, never going back).
Every change becomes visible at a *stamp* of that clock, and rows keep their recent versions, so a
shard can answer "as of t" (services/region/lua/versions.lua).

Read-only transaction (``read_plan``): round 1 reads every shard now; each row comes with an EVT
(its state is valid from then at the latest) and an LVT (until then at least: the shard's clock,
or just below the proposal of a transaction staged on the row). If the greatest EVT (and the
session's floor: what it has already seen here) is at most every LVT, the rows are one snapshot.
Otherwise the effective time is the least LVT at or above that bound (a shard's present: the
answer is fresh), and the shards with an earlier LVT are read again as of it (round 2). A shard
that holds a staged part whose proposal is at or below the effective time names it; round 3 asks
its coordinator, which answers committed (with its stamp), aborted, or undecided, and then promises
to commit above the effective time (so the reader never waits); round 4 reads those shards again,
applying the committed parts first. Never blocks; four rounds at most, one in the common case.

Write-only transaction (``write_plan``, atomic batches over several shards): the cohorts (every
shard but the coordinator) stage their parts, invisible, each proposing a stamp above its clock;
the coordinator writes its own rows at a ts above every proposal, records the decision, and makes
the whole batch one update (one label, one bulk entry) for the other regions; then the cohorts
apply their parts at that stamp. A reader that meets a staged part asks the coordinator (above);
a client that dies leaves staged parts that the region's sweeper settles by asking the coordinator
(aborting what was never committed). A batch on one shard is one gear call: atomic by itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from causal_client import wire
from causal_client.data import Mutation, ReadSpec, Row
from causal_client.errors import CausalError, InvalidRequest, OutcomeUnknown, StoreTimeout
from causal_client.label import Label, observed

RESTARTS = 3  # a read-only transaction that outlives the versions it reads starts again this often


@dataclass(frozen=True, slots=True)
class ShardCall:
    """One gear call of a round: ``function`` on ``shard`` with ``args``."""

    shard: int
    function: str
    args: list
    read_only: bool = False


# A gear's reply, or the CausalError the call raised. A reply is RESP as its gear shapes it: the
# plans below index and convert replies (after _raise_any) by what they know of that shape, which
# the type checker cannot follow: hence their `type: ignore[index]` and `[call-overload]`.
Reply = object
Plan = Generator[list[ShardCall], list[Reply], object]
Steps = Generator[list[ShardCall], list[Reply], None]  # rounds of a plan that return nothing


def run_sync(plan: Plan, call: Callable[[ShardCall], object], pool: Executor | None = None):
    """Runs a plan with ``call`` (one gear call; raises CausalError), a round's calls at once on
    ``pool`` (one after the other without); returns the plan's result."""

    def one(shard_call: ShardCall) -> Reply:
        try:
            return call(shard_call)
        except CausalError as exc:
            return exc

    try:
        round_ = next(plan)
        while True:
            if pool is not None and len(round_) > 1:
                replies = list(pool.map(one, round_))
            else:
                replies = [one(c) for c in round_]
            round_ = plan.send(replies)
    except StopIteration as done:
        return done.value


def _raise_any(replies: list[Reply]) -> None:
    for reply in replies:
        if isinstance(reply, CausalError):
            raise reply


def _shard_of_gear(gear: str) -> int:
    return int(gear.rsplit("/", 1)[1])


@dataclass(frozen=True, slots=True)
class ReadResult:
    rows: list[Row]
    seen: Label  # the greatest label among what was read
    floor: int  # the snapshot's time: the session's next reads here are at least as late


def read_args(label: Label, at: int, settles: Sequence[tuple[str, str, int]], reads: list[list]) -> list:
    args: list = [wire.GEARS_API, *wire.label_args(label), at, len(settles)]
    for txid, decision, stamp in settles:
        args += [txid, decision, stamp]
    args.append(len(reads))
    for read in reads:
        args += read
    return args


def read_plan(
    label: Label, specs: Sequence[ReadSpec], shards: int, floor: int = 0, vectors: bool = False
) -> Plan:
    """A read-only transaction (module doc): every spec read in one snapshot, at or after
    ``floor``. Returns a :class:`ReadResult`."""
    parts = wire.by_shard(((s.group, s.row) for s in specs), shards)
    reads = {k: [specs[i].gear_args() for i in ix] for k, ix in parts.items()}
    for _ in range(RESTARTS):
        raw: dict[int, list] = {}
        replies = yield [
            ShardCall(k, wire.READ, read_args(label, 0, [], reads[k]), read_only=True) for k in parts
        ]
        _raise_any(replies)
        for k, reply in zip(parts, replies, strict=True):
            raw[k] = list(reply[2:])  # type: ignore[index]
        present = max(int(reply[0]) for reply in replies)  # type: ignore[index]
        lower = max([floor, *(int(r[5]) for rows in raw.values() for r in rows)])
        lvts = {k: min(int(r[6]) for r in rows) for k, rows in raw.items()}
        if all(lvt >= lower for lvt in lvts.values()):
            return _result(specs, parts, raw, lower, vectors)
        # A shard's present (the answer is fresh), never far behind it: a part staged long ago
        # (its writer died) lowers its rows' LVT, and versions are kept for a while only.
        at = min((lvt for lvt in lvts.values() if lvt >= lower), default=lower)
        at = max(at, present - wire.VERSIONS_KEPT_US // 2)
        try:
            yield from _read_as_of(label, at, [k for k, lvt in lvts.items() if lvt < at], reads, raw)
        except StoreTimeout:
            continue  # the versions it needs are gone: a fresh start
        return _result(specs, parts, raw, at, vectors)
    raise StoreTimeout(f"a read-only transaction did not finish within {RESTARTS} tries")


def _read_as_of(
    label: Label, at: int, shards: list[int], reads: dict[int, list], raw: dict[int, list]
) -> Steps:
    """Rounds 2-4: ``shards`` read again as of ``at``, staged parts resolved at their coordinators."""
    replies = yield [ShardCall(k, wire.READ_AT, read_args(label, at, [], reads[k])) for k in shards]
    _raise_any(replies)
    unresolved: dict[int, list[str]] = {}  # shard -> txids it named
    coordinators: dict[str, int] = {}
    for k, reply in zip(shards, replies, strict=True):
        raw[k] = list(reply[2:])  # type: ignore[index]
        named = reply[1]  # type: ignore[index]
        for txid, gear in zip(named[::2], named[1::2], strict=True):
            txid = txid.decode() if isinstance(txid, bytes) else txid
            gear = gear.decode() if isinstance(gear, bytes) else gear
            unresolved.setdefault(k, []).append(txid)
            coordinators[txid] = _shard_of_gear(gear)
    if not unresolved:
        return
    by_coordinator: dict[int, list[str]] = {}
    for txid, shard in coordinators.items():
        by_coordinator.setdefault(shard, []).append(txid)
    order = list(by_coordinator)
    replies = yield [ShardCall(c, wire.TXN_CHECK, [wire.GEARS_API, at, 0, *by_coordinator[c]]) for c in order]
    _raise_any(replies)
    decisions: dict[str, tuple[str, int]] = {}
    for c, reply in zip(order, replies, strict=True):
        for txid, answer in zip(by_coordinator[c], reply, strict=True):  # type: ignore[call-overload]
            kind = answer[0].decode() if isinstance(answer[0], bytes) else answer[0]
            decisions[txid] = (kind, int(answer[1]) if kind == "c" else 0)
    again = list(unresolved)
    replies = yield [
        ShardCall(
            k, wire.READ_AT, read_args(label, at, [(t, *decisions[t]) for t in unresolved[k]], reads[k])
        )
        for k in again
    ]
    _raise_any(replies)
    for k, reply in zip(again, replies, strict=True):
        if reply[1]:  # type: ignore[index]
            raise StoreTimeout(f"shard {k}: transactions staged after the snapshot was fixed (a bug)")
        raw[k] = list(reply[2:])  # type: ignore[index]


def _result(
    specs: Sequence[ReadSpec], parts: dict[int, list[int]], raw: dict[int, list], floor: int, vectors: bool
) -> ReadResult:
    rows: list[Row | None] = [None] * len(specs)
    best = Label.zero()
    for k, idx in parts.items():
        for i, reply in zip(idx, raw[k], strict=True):
            rows[i], seen = Row.from_gear(specs[i].group, specs[i].row, reply, vectors)
            best = best.merge(seen)
    return ReadResult(rows, best, floor)  # type: ignore[arg-type]  # every spec's row is set above


def write_args(label: Label, head: list, mutations: Sequence[Mutation]) -> list:
    """version, label, ``head`` (what the gear takes before the mutations), the mutations."""
    args: list = [wire.GEARS_API, *wire.label_args(label), *head, len(mutations)]
    for mutation in mutations:
        args += mutation.gear_args()
    return args


def write_plan(
    label: Label, mutations: Sequence[Mutation], shards: int, gear_ids: Sequence[str], atomic: bool = True,
    vectors: bool = False,
) -> Plan:  # fmt: skip
    """Writes ``mutations`` (module doc): atomically, unless ``atomic`` is False (each row its own
    update, as the cheaper path for writes that need no atomicity). Returns the greatest label
    made (an atomic batch's one label)."""
    if not mutations:
        raise InvalidRequest("a batch needs at least one mutation")
    if len(mutations) > wire.MAX_OPS:
        raise InvalidRequest(f"at most {wire.MAX_OPS} mutations per batch, got {len(mutations)}")
    parts = wire.by_shard(((m.group, m.row) for m in mutations), shards)
    target = f"{mutations[0].group}/{mutations[0].row}"
    flag = "1" if atomic else "0"
    if len(parts) == 1:
        (k, idx), = parts.items()  # fmt: skip
        replies = yield [ShardCall(k, wire.WRITE, write_args(label, [flag], [mutations[i] for i in idx]))]
        _raise_any(replies)
        last = mutations[idx[-1]] if idx and not atomic else None
        made_target = f"{last.group}/{last.row}" if last else target
        return observed(int(replies[0]), gear_ids[k], made_target, vectors)  # type: ignore[call-overload]
    if not atomic:
        return (yield from _write_each(label, mutations, parts, gear_ids, vectors))
    return (yield from _transaction(label, mutations, parts, gear_ids, target, vectors))


def _write_each(
    label: Label,
    mutations: Sequence[Mutation],
    parts: dict[int, list[int]],
    gear_ids: Sequence[str],
    vectors: bool,
) -> Plan:
    """Non-atomic: every shard checks its part first (a bad mutation anywhere writes nothing
    anywhere), then each writes its own. A shard that failed while another wrote its part
    leaves the batch in part: an unknown outcome for the caller, never a plain failure."""
    calls = {k: write_args(label, ["0"], [mutations[i] for i in ix]) for k, ix in parts.items()}
    _raise_any((yield [ShardCall(k, wire.CHECK_WRITE, args, read_only=True) for k, args in calls.items()]))
    replies = yield [ShardCall(k, wire.WRITE, args) for k, args in calls.items()]
    failed = [r for r in replies if isinstance(r, CausalError)]
    if failed and len(failed) < len(replies) and not isinstance(failed[0], OutcomeUnknown):
        raise OutcomeUnknown(
            f"{failed[0]}; the batch's other shards wrote their parts (a non-atomic batch: read its "
            "rows to know what it holds)"
        ) from failed[0]
    _raise_any(replies)
    best = Label.zero()
    for (k, idx), ts in zip(parts.items(), replies, strict=True):
        last = mutations[idx[-1]]
        best = best.merge(observed(int(ts), gear_ids[k], f"{last.group}/{last.row}", vectors))  # type: ignore[call-overload]
    return best


def _coordinator(mutations: Sequence[Mutation], parts: dict[int, list[int]]) -> int:
    """The shard that increments counters (the only one that may: a counter's partial sum is its
    shard's to compute), else the first mutation's."""
    for k, idx in parts.items():
        if any(mutations[i].increments() for i in idx):
            return k
    return next(iter(parts))


def _transaction(
    label: Label, mutations: Sequence[Mutation], parts: dict[int, list[int]], gear_ids: Sequence[str],
    target: str, vectors: bool,
) -> Plan:  # fmt: skip
    txid = uuid.uuid4().hex
    coordinator = _coordinator(mutations, parts)
    cohorts = [k for k in parts if k != coordinator]
    head = [txid, gear_ids[coordinator]]
    replies = yield [
        ShardCall(k, wire.STAGE, write_args(label, head, [mutations[i] for i in parts[k]])) for k in cohorts
    ]
    failed = [r for r in replies if isinstance(r, CausalError)]
    if failed:
        yield [ShardCall(k, wire.SETTLE, [txid, "a", 0]) for k in cohorts]  # undo what was staged
        raise failed[0]
    floor = max(int(r) for r in replies)  # type: ignore[call-overload]
    replies = yield [ShardCall(coordinator, wire.COMMIT, write_args(label, [txid, floor], mutations))]
    outcome = replies[0]
    if isinstance(outcome, OutcomeUnknown):
        raise outcome  # it may have committed: the region's sweeper settles the cohorts either way
    if isinstance(outcome, CausalError):  # refused (aborted meanwhile, or a bad mutation): undone
        yield [ShardCall(k, wire.SETTLE, [txid, "a", 0]) for k in cohorts]
        raise outcome
    ts = int(outcome)  # type: ignore[call-overload]
    yield [ShardCall(k, wire.SETTLE, [txid, "c", ts]) for k in cohorts]  # a failure: the sweeper's
    return observed(ts, gear_ids[coordinator], target, vectors)
