"""Atomic batches (write-only transactions) and multi-reads as read-only transactions, across
shards, groups and regions, on every protocol; the death of a writer, of a shard's store.

The experiment that showed the problem: a writer batches rows on different shards, readers at
every region multi-read them; a read that sees part of a batch is fractured. With atomic=False
(each row its own update, as every batch was before) readers do see fractured batches: the count
bites; with transactions, none.
"""

from __future__ import annotations

import itertools
import signal
import threading
import time

import pytest
import redis
from helpers.deadlines import scaled
from helpers.transactions import (
    count_fractured,
    rows_on_shards,
    sharded,
    staged_parts,
    start_stopping_writer,
)
from helpers.waiting import eventually, unique

from causal_client import (
    CausalClient,
    InvalidRequest,
    Mutation,
    NotReplicatedHere,
    OutcomeUnknown,
    ReadSpec,
    RegionUnavailable,
    transactions,
    wire,
)
from causal_client.label import Label
from services.launcher.cluster import Cluster
from services.region import gears

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

SECONDS = 2.0


@pytest.fixture(scope="module", params=["eventual", "saturn", "gentlerain", "cure", "c3"])
def two_shards(request, tmp_path_factory):
    topology = sharded("two-region.toml", request.param, 2)
    with (
        Cluster(topology, tmp_path_factory.mktemp(f"txn-{request.param}")) as cluster,
        CausalClient.connect(topology.client_address("a")) as client,
    ):
        yield cluster, client


def the_rows(shards: int, count: int = 2) -> list[tuple[str, str]]:
    names = rows_on_shards(["all"] * count, shards, unique("t"))
    return [("all", name) for name in names]


@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "non-atomic"])
def test_no_read_sees_part_of_a_batch_at_any_region(two_shards, atomic):
    _, client = two_shards
    rows = the_rows(2)
    written, tally = count_fractured(client, "a", rows, {"a": rows, "b": rows}, SECONDS, atomic=atomic)
    assert written > 20 and all(reads > 20 for reads, _ in tally.values()), tally
    fractured = sum(bad for _, bad in tally.values())
    if atomic:
        assert fractured == 0, tally
    else:  # the count can see what atomicity prevents (at the remote region above all)
        assert fractured > 0, tally


def test_the_gateway_runs_the_same_transactions(two_shards):
    """Clients behind the regions' gRPC gateways: the frontend runs the same plans."""
    cluster, _ = two_shards
    rows = the_rows(2)
    with CausalClient.connect_gateway(cluster.topology.frontend_endpoint("a")) as client:
        written, tally = count_fractured(client, "a", rows, {"a": rows, "b": rows}, SECONDS, at_least=11)
    assert written > 10 and all(reads > 10 for reads, _ in tally.values()), tally
    assert sum(bad for _, bad in tally.values()) == 0, tally


def test_an_acknowledged_batch_is_whole_for_the_writer_and_everywhere(two_shards):
    _, client = two_shards
    rows = the_rows(2)
    session = client.session("a")
    for n in range(20):
        session.batch([Mutation(g, r).update({"v": str(n)}) for g, r in rows])
        assert {row.text("v") for row in session.multi_read([ReadSpec(g, r) for g, r in rows])} == {str(n)}
    reader = client.session("b")
    eventually(lambda: {r.text("v") for r in reader.multi_read([ReadSpec(g, r) for g, r in rows])} == {"19"})


def test_a_read_never_shows_a_row_without_the_causal_past_of_another(two_shards):
    """A writer sets x (one shard), then y (another) to n, again and again; a multi-read of
    [x, y] (x's shard read first) must never return a y newer than its x: that y's past
    includes x = n. Reads shard by shard (no snapshot) do return that."""
    _, client = two_shards
    (_, x), (_, y) = the_rows(2)
    stop = threading.Event()

    def write() -> None:
        writer = client.session("a")
        for n in itertools.count():
            if stop.is_set():
                return
            writer.write("all", x, {"v": str(n)})
            writer.write("all", y, {"v": str(n)})

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    reader, broken, reads = client.session("a"), 0, 0
    ends = time.monotonic() + SECONDS  # the run's length (a fixed time)
    try:
        while time.monotonic() < ends:
            got_x, got_y = reader.multi_read([ReadSpec("all", x), ReadSpec("all", y)])
            broken += int(got_y.text("v") or -1) > int(got_x.text("v") or -1)
            reads += 1
    finally:
        stop.set()
        thread.join(scaled(10))
    assert reads > 50 and broken == 0, (reads, broken)


def test_a_session_resumed_after_its_batch_reads_it_even_while_a_part_is_unsettled(two_shards):
    """The batch committed but its cohort's settle failed (the part is staged, the sweeper has
    not come yet): a session resumed from the writer's token that reads only the cohort's row
    sees the batch (its label is a time of the region), as the writer would."""
    _, client = two_shards
    rows = sorted(the_rows(2), key=on_shard)  # coordinator shard 0, cohort shard 1
    writer = client.session("a")
    writer.batch([Mutation(g, r).set("v", "1") for g, r in rows])

    def call(c: transactions.ShardCall):
        if c.function == wire.SETTLE:
            raise RegionUnavailable("settles are lost in this test")
        return client.transport._gear("a", c.shard, c.function, c.args, read_only=c.read_only)  # type: ignore[attr-defined]

    gear_ids = ["a/0", "a/1"]
    plan = transactions.write_plan(writer.label, [Mutation(g, r).set("v", "2") for g, r in rows], 2, gear_ids)
    made = transactions.run_sync(plan, call)
    writer.label = writer.label.merge(made)
    resumed = client.session("a", label=writer.token)
    assert resumed.read(*rows[1]).text("v") == "2"


def test_bad_batches_are_refused_and_write_nothing(two_shards):
    cluster, client = two_shards
    rows = the_rows(2)
    session = client.session("a")
    with pytest.raises(InvalidRequest, match="at least one mutation"):
        session.batch([])
    too_many = [Mutation("all", f"{rows[0][1]}-{i}").set("v", "x") for i in range(wire.MAX_OPS + 1)]
    with pytest.raises(InvalidRequest, match=f"at most {wire.MAX_OPS}"):
        session.batch(too_many)
    bad = [Mutation(g, r).set("v", "x") for g, r in rows] + [Mutation("all", rows[0][1] + "b").set("", "x")]
    with pytest.raises(InvalidRequest):
        session.batch(bad)
    spread = [Mutation(g, r).increment("n") for g, r in rows]  # counters on two shards
    with pytest.raises(InvalidRequest, match="increments counters of one shard only"):
        session.batch(spread)
    found = session.multi_read([ReadSpec(g, r) for g, r in [*rows, ("all", f"{rows[0][1]}-0")]])
    assert all(len(row) == 0 for row in found)
    assert staged_parts(cluster.topology, "a") == 0
    session.batch([*spread[:1], Mutation(*rows[1]).set("v", "ok")])  # counters on one shard: fine


def test_a_coordinator_reads_no_key_of_another_shards_row(two_shards):
    """The coordinator of a batch checks only its own rows (the others' shards check theirs when
    they stage): on a Redis Cluster another shard's keys may be on another node. Shown by a
    decoy: a counter cell planted at the coordinator under the other row's key, which a
    coordinator that read it would take for that row and refuse the set."""
    cluster, client = two_shards
    (g0, r0), (g1, r1) = the_rows(2)
    coordinator, other = wire.shard_of(g0, r0, 2), wire.shard_of(g1, r1, 2)
    decoy = redis.Redis.from_url(cluster.topology.redis_url("a", coordinator))
    decoy_key = gears.row_keys(wire.shard_tag(coordinator), g1, r1)[0]  # on the wrong shard: never read
    decoy.hset(decoy_key, "v", "1|x|c|1")
    try:
        client.session("a").batch([Mutation(g0, r0).set("v", "here"), Mutation(g1, r1).set("v", "there")])
        rows = client.session("a").multi_read([ReadSpec(g0, r0, ("v",)), ReadSpec(g1, r1, ("v",))])
        assert [row.text("v") for row in rows] == ["here", "there"] and coordinator != other
    finally:
        decoy.delete(decoy_key)
        decoy.close()


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    topology = sharded("demo-3region-partial.toml", "saturn", 3)
    with (
        Cluster(topology, tmp_path_factory.mktemp("txn-partial")) as cluster,
        CausalClient.connect(topology.client_address("ireland")) as client,
    ):
        yield cluster, client


def test_a_batch_over_three_groups_and_shards_appears_at_once_where_each_part_lives(partial):
    """Ireland writes rows of all, atlantic and europe (one per shard); virginia replicates all
    and atlantic, frankfurt all and europe: each sees its part of every batch whole."""
    _, client = partial
    groups = ["all", "atlantic", "europe"]
    rows = list(zip(groups, rows_on_shards(groups, 3, unique("p")), strict=True))
    readers = {
        "ireland": rows,
        "virginia": [r for r in rows if r[0] in ("all", "atlantic")],
        "frankfurt": [r for r in rows if r[0] in ("all", "europe")],
    }
    written, tally = count_fractured(client, "ireland", rows, readers, SECONDS)
    assert written > 20 and all(reads > 20 for reads, _ in tally.values()), tally
    assert sum(bad for _, bad in tally.values()) == 0, tally
    for region, mine in readers.items():
        reader = client.session(region, auto_migrate=False)
        eventually(lambda r=reader, m=mine: {x.text("v") for x in r.multi_read([ReadSpec(*p) for p in m])}
                   == {str(written)}, timeout=20)  # fmt: skip


def test_a_batch_touching_a_group_not_here_is_refused_whole(partial):
    _, client = partial
    session = client.session("virginia", auto_migrate=False)
    row = unique("nothere")
    with pytest.raises(NotReplicatedHere):
        session.batch([Mutation("all", row).set("v", "x"), Mutation("europe", row).set("v", "x")])
    assert len(session.read("all", row)) == 0


@pytest.mark.parametrize(("protocol", "stage"), [("eventual", "before-commit"), ("saturn", "before-settle")])
def test_a_writer_killed_in_the_middle_of_a_batch_leaves_it_whole_or_absent(
    launch, client_for, protocol, stage
):
    """The writer is SIGKILLed with its batch staged on a shard: before the coordinator decided
    (the batch must vanish) or after (it must appear whole). Readers at both regions see the
    old value everywhere or the new one everywhere, at once and after the sweeper settled it."""
    cluster = launch(sharded("two-region.toml", protocol, 2).model_dump())
    client = client_for(cluster)
    rows = rows_on_shards(["all"] * 2, 2, unique("k"))
    pairs = [("all", r) for r in rows]
    child = start_stopping_writer(cluster.topology.client_address("a"), "a", pairs, stage)
    child.send_signal(signal.SIGKILL)
    child.wait(scaled(10))
    expected = "1" if stage == "before-commit" else "2"
    specs = [ReadSpec(g, r) for g, r in pairs]
    for region in ("a", "b"):
        reader = client.session(region)
        eventually(lambda r=reader: {x.text("v") for x in r.multi_read(specs)} == {expected}, timeout=20)
    eventually(lambda: staged_parts(cluster.topology, "a") == 0, timeout=15)
    for region in ("a", "b"):
        assert {x.text("v") for x in client.session(region).multi_read(specs)} == {expected}


def test_a_remote_proxy_killed_while_applying_batches_leaves_none_in_part(launch, client_for):
    """b's bulk receiver (its remote proxy, which applies a's batches across b's shards) is
    SIGKILLed twice while batches stream: readers at b never see part of one, and b catches up."""
    cluster = launch(sharded("two-region.toml", "saturn", 2).model_dump())
    client = client_for(cluster)
    rows = the_rows(2)

    def crash_twice() -> None:  # at fixed times, while the batches stream (5 s)
        for pause in (1.0, 1.0):
            time.sleep(pause)
            cluster.kill("b.bulk-receiver")
            time.sleep(0.3)  # down a while
            cluster.restart("b.bulk-receiver")

    killer = threading.Thread(target=crash_twice)
    killer.start()
    written, tally = count_fractured(client, "a", rows, {"b": rows}, 5.0)
    killer.join()
    assert tally["b"][1] == 0 and tally["b"][0] > 20, tally
    reader = client.session("b")
    specs = [ReadSpec(g, r) for g, r in rows]
    eventually(lambda: {x.text("v") for x in reader.multi_read(specs)} == {str(written)}, timeout=30)
    eventually(lambda: staged_parts(cluster.topology, "b") == 0, timeout=15)


def test_a_shard_killed_between_commit_and_settle_comes_back_with_its_part(launch, client_for):
    """The cohort shard's store is SIGKILLed right after the coordinator committed (its part is
    staged, on disk): the batch is acknowledged; once the store is back, its part is there."""
    cluster = launch(sharded("two-region.toml", "saturn", 2).model_dump())
    client = client_for(cluster)
    rows = rows_on_shards(["all"] * 2, 2, unique("s"))
    pairs = [("all", r) for r in rows]
    child = start_stopping_writer(cluster.topology.client_address("a"), "a", pairs, "before-settle")
    cohort = next(k for k in range(2) if staged_parts(cluster.topology, "a", k))
    cluster.kill(f"a.redis{cohort}")
    child.send_signal(signal.SIGKILL)
    child.wait(scaled(10))
    time.sleep(0.3)  # down a while (a fixed time)
    cluster.restart(f"a.redis{cohort}")
    specs = [ReadSpec(g, r) for g, r in pairs]
    for region in ("a", "b"):
        reader = client.session(region)
        eventually(lambda r=reader: {x.text("v") for x in r.multi_read(specs)} == {"2"}, timeout=30)
    eventually(lambda: staged_parts(cluster.topology, "a") == 0, timeout=15)


def test_a_batch_with_a_shard_down_writes_nothing_and_says_so(launch, client_for):
    """Shard 1's store is down (connection refused: surely not reached). A batch over shards 0
    and 1, atomic or not, fails as unavailable (not as an unknown outcome) and writes nothing:
    the shards check their parts before any writes."""
    cluster = launch(sharded("two-region.toml", "saturn", 2).model_dump())
    session = client_for(cluster).session("a")
    cluster.kill("a.redis1")
    for atomic in (True, False):
        rows = sorted((("all", r) for r in rows_on_shards(["all"] * 2, 2, unique("d"))), key=on_shard)
        with pytest.raises(RegionUnavailable) as told:
            session.batch([Mutation(g, r).set("v", "1") for g, r in rows], atomic=atomic)
        assert not isinstance(told.value, OutcomeUnknown), told.value
        assert not session.read(*rows[0])
    cluster.restart("a.redis1")


def test_a_non_atomic_batch_written_in_part_is_an_unknown_outcome_never_a_failure():
    """A shard that fails between the check and its write while another shard wrote its part
    leaves the batch in part: the caller hears an unknown outcome, not a failure (which says
    nothing was written). The plan, fed the replies that sequence gives."""
    rows = sorted((("all", r) for r in rows_on_shards(["all"] * 2, 2, unique("p"))), key=on_shard)
    batch = [Mutation(g, r).set("v", "1") for g, r in rows]
    plan = transactions.write_plan(Label.zero(), batch, 2, ["a/0", "a/1"], atomic=False)
    checks = next(plan)
    assert [c.function for c in checks] == [wire.CHECK_WRITE] * 2
    writes = plan.send([1, 1])
    assert [c.function for c in writes] == [wire.WRITE] * 2
    with pytest.raises(OutcomeUnknown, match="other shards wrote their parts"):
        plan.send([17, RegionUnavailable("region a store: connection refused")])
    whole_failure = transactions.write_plan(Label.zero(), batch, 2, ["a/0", "a/1"], atomic=False)
    next(whole_failure)
    whole_failure.send([1, 1])
    with pytest.raises(RegionUnavailable) as told:  # nothing written anywhere: a failure
        whole_failure.send([RegionUnavailable("down"), RegionUnavailable("down")])
    assert not isinstance(told.value, OutcomeUnknown)


def on_shard(key: tuple[str, str]) -> int:
    return wire.shard_of(*key, 2)


def test_parts_left_staged_while_no_sweeper_runs_never_fail_a_read(launch, client_for):
    """With the region's sweeper down (its bulk receiver killed), two dead writers' staged parts
    stay for longer than versions are kept, with a row written between them: a read of all
    three neither waits nor fails (its snapshot time is never older than versions go), and
    shows none of the parts; once the sweeper is back, they are gone."""
    cluster = launch(sharded("two-region.toml", "eventual", 2).model_dump())
    client = client_for(cluster)
    cluster.kill("a.bulk-receiver")
    address = cluster.topology.client_address("a")
    # The first batch's coordinator is shard 0 (its part staged on 1), the second's shard 1.
    first = sorted((("all", r) for r in rows_on_shards(["all"] * 2, 2, unique("z"))), key=on_shard)
    second = sorted((("all", r) for r in rows_on_shards(["all"] * 2, 2, unique("y"))), key=on_shard)[::-1]
    between = ("all", unique("m"))
    writers = [start_stopping_writer(address, "a", first, "before-commit")]
    client.session("a").write(*between, {"v": "m"})
    writers.append(start_stopping_writer(address, "a", second, "before-commit"))
    for child in writers:
        child.send_signal(signal.SIGKILL)
        child.wait(scaled(10))
    time.sleep(wire.VERSIONS_KEPT_US / 1e6 + 1)  # a fixed time: past how long versions are kept
    specs = [ReadSpec(g, r) for g, r in [*first, between, *second]]
    for _ in range(5):
        got = [x.text("v") for x in client.session("a").multi_read(specs)]
        assert got == ["1", "1", "m", "1", "1"]
    assert staged_parts(cluster.topology, "a") == 2
    cluster.restart("a.bulk-receiver")
    eventually(lambda: staged_parts(cluster.topology, "a") == 0, timeout=15)


def raw_cell(cluster: Cluster, region: str, group: str, row: str, column: str) -> tuple[str, str]:
    """A cell as its shard's store holds it, read past the gears ((ts|src, value); a reader
    would settle a committed part it meets, and hide what the sweeper did or did not do)."""
    shard = wire.shard_of(group, row, cluster.topology.region(region).shards)
    with redis.Redis.from_url(cluster.topology.redis_url(region, shard)) as store:
        raw = store.hget(gears.row_keys(wire.shard_tag(shard), group, row)[0], column)
    assert raw is not None, f"{group}/{row} has no {column!r} at {region}"
    ts, src, _flag, value = raw.decode().split("|", 3)
    return f"{ts}|{src}", value


@pytest.mark.parametrize(("stage", "expected"), [("before-settle", "2"), ("before-commit", "1")])
def test_the_sweeper_alone_settles_parts_as_their_coordinator_decided(launch, stage, expected):
    """No reader touches the rows (readers settle committed parts they meet themselves, which
    would hide a sweeper that settles wrongly). A writer dies after its batch of "2" committed at
    the coordinator but before its cohort's part was settled, or before the commit (undecided):
    the sweeper alone must apply the first part at the commit (the cohort's cell becomes the
    coordinator's update) and abort the second (both rows keep the "1" before it)."""
    cluster = launch(sharded("two-region.toml", "eventual", 2).model_dump())
    cluster.kill("a.bulk-receiver")  # no sweeper until the parts are staged
    rows = sorted((("all", r) for r in rows_on_shards(["all"] * 2, 2, unique("s"))), key=on_shard)
    child = start_stopping_writer(cluster.topology.client_address("a"), "a", rows, stage)
    child.send_signal(signal.SIGKILL)
    child.wait(scaled(10))
    assert staged_parts(cluster.topology, "a", shard=1) == 1  # the cohort's part
    cluster.restart("a.bulk-receiver")
    eventually(lambda: staged_parts(cluster.topology, "a") == 0, timeout=15)
    (coordinator_update, coordinator_value), (cohort_update, cohort_value) = (
        raw_cell(cluster, "a", g, r, "v") for g, r in rows
    )
    assert (coordinator_value, cohort_value) == (expected, expected)
    assert cohort_update == coordinator_update, "the two rows of one batch hold different updates"


def test_a_regions_shards_never_give_one_ts_and_both_updates_reach_every_region(two_shards):
    """Two writes on a region's two shards by clients whose pasts end at the same time, a
    little in the future (so that both gears take their ts from it, as two writes in one
    microsecond would): the gears give them different ts (shard k's fall to k modulo the
    shards), and both reach b. With one ts, a receiver, which tells a region's labels apart by
    ts alone (its watermark per origin, bulk transfer's positions, the exactly-once checks),
    delivered the first and dropped the second as a duplicate: lost at every other region."""
    _, client = two_shards
    rows = the_rows(2)
    past = Label(ts=int(time.time() * 1e6) + 500_000, src="a/0")
    labels = []
    for group, row in rows:
        writer = client.session("a")
        writer.label = past
        labels.append(writer.write(group, row, {"v": row}))
    assert labels[0].ts != labels[1].ts, labels
    reader = client.session("b")
    eventually(lambda: [reader.read(g, r, ["v"]).text("v") for g, r in rows] == [r for _, r in rows])
