"""Strongly consistent registers (causal_client/strong.py, services/region/lua/strong.lua) on a
real three-region cluster: a value written anywhere is read everywhere; of concurrent
insert-if-absent from every region exactly one wins; a minority of regions down changes nothing,
a majority down is named; bad input writes nothing; and random concurrent histories from every
region are linearizable (loadtest/check/linearizable.py)."""

from __future__ import annotations

import itertools
import threading

import pytest
from helpers.strong_histories import assert_linearizable_history
from helpers.waiting import unique

from causal_client import (
    CausalClient,
    CompareAndSet,
    Decrement,
    InsertIfAbsent,
    InvalidRequest,
    NoQuorum,
    wire,
)
from causal_client.commands import BadCommand
from causal_client.errors import CausalError, Conflict, OutcomeUnknown
from causal_client.strong import StrongRegisters, _TsReply
from loadtest.check.linearizable import READ, WRITE, StrongOp, check_linearizable

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

NS = "test"


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """causality-3region (A-B 5 ms, B-C 5 ms, A-C 100 ms), shared by the module's tests."""
    from helpers.topologies import load_topology

    from services.launcher.cluster import Cluster

    cluster = Cluster(
        load_topology("causality-3region.toml", protocol="eventual"), tmp_path_factory.mktemp("strong")
    )
    with cluster:
        yield cluster


def client_at(cluster, site: str, timeout: float = 10.0) -> CausalClient:
    return CausalClient.connect(cluster.topology.client_address("a"), site=site, timeout=timeout)


def test_a_value_written_anywhere_is_read_everywhere(three):
    key = unique("k")
    with client_at(three, "A") as at_a, client_at(three, "C") as at_c:
        a, c = at_a.session("a"), at_c.session("c")
        assert c.strong_read(NS, key).value is None
        ts = a.strong_write(NS, key, "one")
        assert ts.endswith(".a") and len(ts.split(".")[0]) == 16
        assert c.strong_read(NS, key).value == "one"  # the value from a, its timestamp from a majority
        c.strong_write(NS, key, "two")
        read = a.strong_read(NS, key)
        assert read.value == "two" and read.ts > ts


def test_read_modify_writes_apply_their_commands(three):
    key = unique("stock")
    with client_at(three, "B") as client:
        s = client.session("b")
        assert s.execute(NS, key, Decrement(1)).applied is False  # nothing to take from
        s.strong_write(NS, key, "3")
        assert s.execute(NS, key, Decrement(2)).value == "1"
        result = s.execute(NS, key, Decrement(2))
        assert (result.applied, result.value) == (False, "1")  # never below the floor
        assert s.execute(NS, key, CompareAndSet("1", "ten")).applied
        assert s.execute(NS, key, CompareAndSet("1", "eleven")).value == "ten"
        assert s.strong_read(NS, key).value == "ten"


def test_of_concurrent_claims_from_every_region_exactly_one_wins(three):
    clients = [client_at(three, site) for site in "ABC"]
    try:
        for _ in range(5):
            key, start = unique("name"), threading.Barrier(6)
            results: list[tuple[str, object]] = []

            def claim(
                client: CausalClient, region: str, who: str, key=key, start=start, results=results
            ) -> None:
                start.wait()
                try:
                    results.append((who, client.session(region).execute(NS, key, InsertIfAbsent(who))))
                except (Conflict, OutcomeUnknown) as exc:  # a loser may give up; never two winners
                    results.append((who, exc))

            threads = [
                threading.Thread(target=claim, args=(c, r, f"{r}{i}"))
                for (c, r), i in itertools.product(zip(clients, "abc", strict=True), range(2))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            winners = [who for who, r in results if getattr(r, "applied", False)]
            holder = clients[0].session("a").strong_read(NS, key).value
            assert len(winners) <= 1 and holder is not None, results
            assert winners in ([holder], []), (winners, holder)
            # everyone who got an answer agrees on the holder
            assert all(r.value == holder for _, r in results if hasattr(r, "value")), results
    finally:
        for client in clients:
            client.close()


def test_a_minority_down_changes_nothing_and_a_majority_down_is_named(three):
    key = unique("k")
    with client_at(three, "A", timeout=2.0) as client:
        s = client.session("a")
        s.strong_write(NS, key, "before")
        three.kill("c.redis0")
        try:
            s.strong_write(NS, key, "while c is down")
            assert s.strong_read(NS, key).value == "while c is down"
            assert s.execute(NS, key, CompareAndSet("while c is down", "cas")).applied
            three.kill("b.redis0")
            try:
                with pytest.raises(NoQuorum) as refused:
                    s.strong_read(NS, key)
                assert set(refused.value.missing) == {"b", "c"} and "majority" in str(refused.value)
                with pytest.raises(NoQuorum, match="b, c"):  # its query found no majority: nothing written
                    s.strong_write(NS, key, "no majority")
            finally:
                three.restart("b.redis0")
        finally:
            three.restart("c.redis0")
        assert client.session("c").strong_read(NS, key).value == "cas"


def skip_write_timestamps(monkeypatch, phase: str) -> None:
    """A mutation of the algorithm, for the tests below to show the checker catches it: the
    phase that stores a write's timestamp at a majority (``"timestamp"``: a write's own, Algorithm
    1 line 3) or a read's write-back (``"write-back"``) is skipped, reported accepted everywhere."""
    real_quorum, real_committing = StrongRegisters._quorum, StrongRegisters._committing

    def accepted_everywhere(self, args):
        return {r: _TsReply(True, args[0], True) for r in self.regions}

    def quorum(self, namespace, key, function, args, what, accepted=False):
        if function == wire.STRONG_SET_TS and args[1] == "w":
            return accepted_everywhere(self, args)
        return real_quorum(self, namespace, key, function, args, what, accepted)

    def committing(self, namespace, key, args, what):
        if args[1] == "w":
            return accepted_everywhere(self, args)
        return real_committing(self, namespace, key, args, what)

    if phase == "timestamp":
        monkeypatch.setattr(StrongRegisters, "_committing", committing)
    else:
        monkeypatch.setattr(StrongRegisters, "_quorum", quorum)


@pytest.mark.parametrize("mutation", [None, "write-back"])
def test_a_read_writes_back_what_it_returns(three, monkeypatch, mutation):
    """A writer died in its timestamp phase: its timestamp is at a alone. A reader at A asks a
    and b (the closest majority), finds it at one of them, and must write it back before it
    returns the new value; otherwise a later reader at C, which asks c and b, returns the old
    value after the new one was read (not linearizable). With the write-back skipped (the
    mutation), the checker finds exactly that."""
    key = unique("partial")
    with client_at(three, "A") as at_a, client_at(three, "C") as at_c:
        at_a.session("a").strong_write(NS, key, "old")
        if mutation:
            skip_write_timestamps(monkeypatch, mutation)
        raw = at_a.transport
        ts, _ = raw.register_call("a", NS, key, "saturn_strong_put", ["", "=new", ""], meta=False)
        raw.register_call("a", NS, key, "saturn_strong_set_ts", [ts.decode(), "w"], meta=True)  # then it died
        first = at_a.session("a").strong_read(NS, key)
        later = at_c.session("c").strong_read(NS, key)
    assert first.value == "new"
    history = [
        StrongOp(0, 0, key, WRITE, "new", None, 0.0, None),  # the writer that died: unknown outcome
        StrongOp(1, 1, key, READ, None, first.value, 1.0, 2.0),
        StrongOp(2, 2, key, READ, None, later.value, 3.0, 4.0),
    ]
    checked = check_linearizable(history, initial=lambda _: "old")
    if mutation:
        assert later.value == "old" and not checked.ok and checked.violations == 1, checked
    else:
        assert later.value == "new", "a read returned the old value after another had returned the new one"
        assert checked.ok


@pytest.mark.parametrize("mutation", [None, "timestamp"])
def test_a_write_is_read_everywhere_once_it_returned(three, monkeypatch, mutation):
    """A write returns only once its timestamp is at a majority: a read from the far region right
    after it returns the new value. With the timestamp phase skipped (the mutation: the value at
    the writer's replica only), that read returns the old value and the checker says so."""
    key = unique("phase")
    with client_at(three, "A") as at_a, client_at(three, "C") as at_c:
        writer, reader = at_a.session("a"), at_c.session("c")
        writer.strong_write(NS, key, "old")
        if mutation:
            skip_write_timestamps(monkeypatch, mutation)
        writer.strong_write(NS, key, "new")
        after = reader.strong_read(NS, key)
    history = [
        StrongOp(0, 0, key, WRITE, "old", None, 0.0, 1.0),
        StrongOp(1, 0, key, WRITE, "new", None, 2.0, 3.0),
        StrongOp(2, 1, key, READ, None, after.value, 4.0, 5.0),
    ]
    checked = check_linearizable(history)
    assert checked.ok is (mutation is None), (after, checked)


@pytest.mark.parametrize("clock_safe", [True, False], ids=["query first", "vivace as published"])
def test_a_write_from_a_region_whose_clock_is_behind_still_comes_last(three, monkeypatch, clock_safe):
    """docs/PROTOCOLS.md, "Clocks": C writes "first" (its timestamp at c and b, a majority; A,
    100 ms away, has not heard of it); then A, its clock 400 ms behind, writes "second". A write
    first asks a majority for their timestamps and stamps above them, so the later write comes
    last and a read returns it. Vivace's write as published (``clock_safe`` off) stamps from A's
    clock alone, below "first": the later write is ordered first, a read returns "first", and the
    checker finds it (what the million-operation soak found once under the clock nemesis)."""
    from loadtest.check.nemesis import set_clock

    monkeypatch.setattr(StrongRegisters, "__init__", _with_clock_safe(clock_safe))
    key = unique("clock")
    with client_at(three, "A") as at_a, client_at(three, "B") as at_b:
        raw = at_b.transport
        ts, _ = raw.register_call("c", NS, key, "saturn_strong_put", ["", "=first", ""], meta=False)
        for region in ("c", "b"):  # C's write, done at a majority
            raw.register_call(region, NS, key, "saturn_strong_set_ts", [ts.decode(), "w"], meta=True)
        set_clock(three.topology, "a", -400.0)
        try:
            written = at_a.session("a").strong_write(NS, key, "second")
        finally:
            set_clock(three.topology, "a", 0.0)
        after = at_b.session("b").strong_read(NS, key)
    history = [
        StrongOp(0, 0, key, WRITE, "first", None, 0.0, 1.0),
        StrongOp(1, 1, key, WRITE, "second", None, 2.0, 3.0),
        StrongOp(2, 2, key, READ, None, after.value, 4.0, 5.0),
    ]
    checked = check_linearizable(history)
    if clock_safe:
        assert written > ts.decode() and after.value == "second" and checked.ok, (written, after, checked)
    else:
        assert written < ts.decode() and after.value == "first", (written, after)
        assert not checked.ok and checked.violations == 1, checked


def _with_clock_safe(clock_safe: bool):
    real = StrongRegisters.__init__

    def init(self, client, fast_paths: bool = True, clock_safe_: bool = clock_safe):
        real(self, client, fast_paths, clock_safe_)

    return init


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda s: s.strong_write(NS, "", "v"), InvalidRequest),
        (lambda s: s.strong_write(NS, "k\x00", "v"), InvalidRequest),
        (lambda s: s.strong_write(NS, "k", "x" * 5000), BadCommand),
        (lambda s: s.strong_read("n" * 300, "k"), InvalidRequest),
        (lambda s: s.execute(NS, "k", "insert"), InvalidRequest),
        (lambda s: s.execute(NS, "k", Decrement(-1)), BadCommand),
    ],
    ids=[
        "empty key",
        "control character",
        "oversized value",
        "long namespace",
        "not a command",
        "bad amount",
    ],
)
def test_bad_input_gets_a_typed_error_and_writes_nothing(three, call, error):
    with client_at(three, "B") as client:
        s = client.session("b")
        with pytest.raises(error):
            call(s)
        assert s.strong_read(NS, "k").value is None


def test_stamps_are_unique_and_above_what_the_replica_saw(three):
    """A read-modify-write's timestamp comes from its region's replica, never from a clock a
    write of the same region could share: two values under one timestamp would let two readers
    of one timestamp see different values (found by the containers' checked run)."""
    with client_at(three, "B") as client:
        call = client.transport.register_call
        key = unique("stamp")
        written, _ = call("b", NS, key, "saturn_strong_put", ["", "=w", ""], meta=False)
        stamps = [call("b", NS, key, "saturn_strong_stamp", [""], meta=False) for _ in range(50)]
        assert len(set(stamps)) == 50 and min(stamps) > written and all(s.endswith(b".b") for s in stamps)
        ahead = b"9000000000000000.c"
        assert call("b", NS, key, "saturn_strong_stamp", [ahead.decode()], meta=False) > ahead
        # a value below the stored timestamp is still kept (a reader's majority may lag this replica)
        call("b", NS, key, "saturn_strong_set_ts", [stamps[-1].decode(), "w"], meta=True)
        call("b", NS, key, "saturn_strong_put", [stamps[0].decode(), "=late", ""], meta=False)
        assert call("b", NS, key, "saturn_strong_data", [stamps[0].decode()], meta=False) == [b"=late"]


def test_the_gears_refuse_what_the_client_would_not_send(three):
    """A client that skips its own checks meets the replica's: typed errors, nothing stored."""
    with client_at(three, "B") as client:
        transport = client.transport
        for args in (["not-a-ts", "=v", ""], ["", "bad\x01value", ""]):
            with pytest.raises(InvalidRequest):
                transport.register_call("b", NS, "raw", "saturn_strong_put", args, meta=False)
        with pytest.raises(InvalidRequest, match="mode"):
            transport.register_call(
                "b", NS, "raw", "saturn_strong_set_ts", ["0000000000000001.b", "x"], meta=True
            )
        assert client.session("b").strong_read(NS, "raw").value is None


def test_random_concurrent_histories_from_every_region_are_linearizable(three):
    """Six sessions (two per region) on three keys for a few seconds: writes, reads and
    read-modify-writes at random; every operation recorded with its call and return times."""
    clients = [client_at(three, site) for site in "ABC"]
    ops = assert_linearizable_history(clients, "abc", NS, seconds=6.0, at_least=100)
    assert len({o.kind for o in ops}) == 3


def test_errors_are_typed_causal_errors():
    assert issubclass(NoQuorum, CausalError) and NoQuorum.retryable
    assert Conflict.retryable and not OutcomeUnknown.retryable
