"""The gears' Redis Functions library on a real Redis server: every check a client's call must
pass is made inside the store, a refused call writes nothing, and a store running another
version of the library refuses a client with a clear, typed error."""

from __future__ import annotations

import asyncio
import random

import pytest
import redis
from helpers.topologies import load_topology

from causal_client import wire
from causal_client.claims import owner_region
from causal_client.data import Mutation, ReadSpec, Row
from causal_client.errors import (
    CausalError,
    InvalidLabel,
    InvalidRequest,
    NotReplicatedHere,
    RegionUnavailable,
    UnknownRegion,
    VersionMismatch,
    WrongPlace,
)
from causal_client.label import Label
from causal_client.transactions import read_args, write_args
from services.labelpath.sources import labels_of
from services.region import gears
from services.region.store import RegionStore

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

TOPOLOGY = load_topology("demo-3region.toml", groups={"all": ["*"], "eu": ["ireland", "frankfurt"]})


def run(coroutine):
    return asyncio.run(coroutine)


def store_at(url: str, region: str = "virginia") -> RegionStore:
    return RegionStore(TOPOLOGY, region, urls=[url])


def mutation(group: str, row: str, *ops: wire.ColumnOp) -> Mutation:
    return Mutation(group, row, list(ops))


def snapshot(url: str) -> dict[bytes, bytes]:
    db = redis.Redis.from_url(url)
    return {key: db.dump(key) for key in sorted(db.keys())}


async def installed(url: str, region: str = "virginia") -> RegionStore:
    store = store_at(url, region)
    await store.install()
    return store


BAD_WRITES = {
    "empty row key": [mutation("all", "", ("s", "c", b"v"))],
    "unknown group": [mutation("nope", "r", ("s", "c", b"v"))],
    "empty column": [mutation("all", "r", ("s", "", b"v"))],
    "no ops": [mutation("all", "r")],
    "unknown op": [mutation("all", "r", ("x", "c", b"v"))],
    "increment not a number": [mutation("all", "r", ("i", "n", "1e3"))],
    "value too big": [mutation("all", "r", ("s", "c", b"x" * (TOPOLOGY.max_value_bytes + 1)))],
    "key too long": [mutation("all", "r" * (wire.MAX_KEY_BYTES + 1), ("s", "c", b"v"))],
    "good row, then a bad one": [
        mutation("all", "r", ("s", "c", b"v")),
        mutation("all", "r2", ("s", "", b"v")),
    ],
    "set on a counter": [mutation("all", "counted", ("s", "n", b"v"))],
}


@pytest.mark.parametrize("case", sorted(BAD_WRITES))
def test_a_refused_write_writes_nothing(redis_url: str, case: str):
    async def scenario() -> None:
        store = await installed(redis_url)
        await store.write(Label.zero(), [mutation("all", "counted", ("i", "n", 1))])
        before = snapshot(redis_url)
        with pytest.raises(InvalidRequest):
            await store.write(Label.zero(), BAD_WRITES[case])
        assert snapshot(redis_url) == before

    run(scenario())


@pytest.mark.parametrize(
    ("label", "error", "match"),
    [
        (Label(ts=5, src="zz/0"), InvalidLabel, "unknown source gear 'zz/0'"),
        (Label(ts=5, src="nodash"), InvalidLabel, "must look like 'region/shard'"),
        (Label(ts=10**17, src="ireland/0"), InvalidLabel, "in the future"),
    ],
)
def test_forged_labels_are_refused_by_every_client_gear(redis_url: str, label, error, match):
    async def scenario() -> None:
        store = await installed(redis_url)
        before = snapshot(redis_url)
        with pytest.raises(error, match=match):
            await store.write(label, [mutation("all", "r", ("s", "c", b"v"))])
        with pytest.raises(error, match=match):
            await store.read(label, [ReadSpec("all", "r")])
        with pytest.raises(error, match=match):
            await store.migrate(label, "ireland")
        with pytest.raises(error, match=match):
            await store.shards[0].visible(label, 0)
        assert snapshot(redis_url) == before

    run(scenario())


def test_groups_regions_and_reads_are_checked(redis_url: str):
    async def scenario() -> None:
        store = await installed(redis_url)
        with pytest.raises(NotReplicatedHere, match="not replicated at region 'virginia'"):
            await store.write(Label.zero(), [mutation("eu", "r", ("s", "c", b"v"))])
        with pytest.raises(UnknownRegion, match="unknown region 'ghost'"):
            await store.migrate(Label.zero(), "ghost")
        with pytest.raises(InvalidRequest, match="slice limit must be at most"):
            await store.read(Label.zero(), [ReadSpec("all", "r", limit=1001)])
        with pytest.raises(InvalidRequest, match="at least one read"):
            await store.read(Label.zero(), [])

    run(scenario())


def test_labels_say_when_the_region_applies_outside_the_trees_order(redis_url: str):
    """The proxy sets the mark (services/saturn/proxy.py); the gears put it in every label they
    make until it is cleared: update and migration labels alike."""

    async def labels_made(store: RegionStore) -> list[bytes]:
        await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"v"))])
        await store.migrate(Label.zero(), "ireland")
        stream = gears.labels_stream(store.topology.traits)  # Saturn's: the bulk stream
        entries = await store.shards[0].stream_after(stream, 0, 1000)
        await store.shards[0].trim_stream(stream, entries[-1][0])
        return [raw.split(b"|", 1)[0] for _, raw in labels_of(entries)]

    async def scenario() -> None:
        store = await installed(redis_url)
        shard = store.shards[0]
        assert await labels_made(store) == [b"u", b"m"]
        await shard.mark_labels_outside_order(True)
        assert await labels_made(store) == [b"U", b"M"]
        await shard.mark_labels_outside_order(False)
        assert await labels_made(store) == [b"u", b"m"]

    run(scenario())


def test_a_store_with_another_library_version_refuses_the_client(redis_url: str):
    """An older region (its store restarted with the library of API 0) and a newer client."""

    async def scenario() -> None:
        store = await installed(redis_url)
        older = gears.library_source().replace(f"local API = '{wire.GEARS_API}'", "local API = '0'")
        assert older != gears.library_source()
        await store.shards[0].redis.function_load(older, replace=True)
        with pytest.raises(VersionMismatch, match=f"runs gears API 0, the client speaks {wire.GEARS_API}"):
            await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"v"))])

    run(scenario())


def test_a_bare_store_gets_the_library_and_refuses_clients_until_configured(redis_url: str):
    async def scenario() -> None:
        store = store_at(redis_url)
        assert await store.shards[0].heartbeat() > 0  # the services' gears load the library
        with pytest.raises(RegionUnavailable, match="no region settings"):
            await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"v"))])
        await store.install()
        assert (await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"v"))])).ts > 0

    run(scenario())


def test_rows_and_claims_are_routed_by_the_same_hash_in_lua_and_python(redis_url: str):
    """A shard's gear refuses rows of another shard and claims of another region: both use
    zlib's CRC-32, so the client's routing and the gears' check must agree on every key."""

    async def scenario() -> None:
        shards = 3
        data = TOPOLOGY.model_dump()
        data["regions"][0]["shards"] = shards
        topology = load_topology(data)
        keys = [f"user:{random.random()}:{'é' * (i % 3)}" for i in range(120)]
        for k in range(shards):
            store = RegionStore(topology, "virginia", urls=[redis_url] * shards)
            await store.shards[k].install(
                {"region": "virginia", "shards": shards, "shard": k, "protocol": "saturn", "emits": 1,
                 "max_value": 100, "regions": " ".join(topology.region_names)},
                {"all": " ".join(topology.group_members["all"])},
                topology.gear_ids("virginia"), "{}",
            )  # fmt: skip
            for key in keys:
                args = write_args(Label.zero(), ["1"], [mutation("all", key, ("s", "c", b"v"))])
                call = store.shards[k].call(wire.WRITE, args)
                if topology.shard_of("virginia", "all", key) == k:
                    await call
                else:
                    with pytest.raises(WrongPlace):
                        await call
            if k == 0:
                for key in keys:
                    owner = owner_region(topology.region_names, "username", key)
                    call = store.shards[0].claim("username", key, "h", release=False)
                    if owner == "virginia":
                        assert (await call)[0]
                    else:
                        with pytest.raises(WrongPlace, match=f"decided by region {owner}"):
                            await call

    run(scenario())


def test_a_batch_over_two_shards_with_a_bad_part_writes_nothing_anywhere(redis_url: str):
    """Each shard's gear checks only its own rows, so a batch over several shards is checked at
    every shard (saturn_check_write) before any writes: a bad mutation for shard 1 must not
    leave shard 0's part written."""

    async def scenario() -> None:
        data = TOPOLOGY.model_dump()
        data["regions"][0]["shards"] = 2
        topology = load_topology(data)
        urls = [redis_url, redis_url.rsplit("/", 1)[0] + "/1"]  # two keyspaces, one server
        store = RegionStore(topology, "virginia", urls=urls)
        await store.install()
        rows = [f"row{i}" for i in range(40)]
        first = next(r for r in rows if topology.shard_of("virginia", "all", r) == 0)
        second = next(r for r in rows if topology.shard_of("virginia", "all", r) == 1)
        before = [snapshot(url) for url in urls]
        good = mutation("all", first, ("i", "n", 1))
        with pytest.raises(InvalidRequest, match="column name must not be empty"):
            await store.write(Label.zero(), [good, mutation("all", second, ("s", "", b"v"))])
        assert [snapshot(url) for url in urls] == before
        made = await store.write(Label.zero(), [good, mutation("all", second, ("s", "c", b"v"))])
        assert made.ts > 0 and [snapshot(url) for url in urls] != before

    run(scenario())


ZERO = wire.label_args(Label.zero())
AT_V = [wire.GEARS_API, 0, 5, "virginia/0", ""]  # an attach's label up to its vector
BAD_CALLS = {
    "migrate to an unknown region": (wire.MIGRATE, [wire.GEARS_API, 0, 0, "", "", "", "ghost"]),
    "migrate with a forged label": (wire.MIGRATE, [wire.GEARS_API, 0, 5, "zz/0", "", "", "ireland"]),
    "migrate with an extra argument": (wire.MIGRATE, [wire.GEARS_API, 0, 0, "", "", "", "ireland", "x"]),
    "claim with an empty key": (wire.CLAIM, [wire.GEARS_API, "username", "", "h", 0]),
    "claim with a control character": (wire.CLAIM, [wire.GEARS_API, "username", "a\x01", "h", 0]),
    "claim neither claim nor release": (wire.CLAIM, [wire.GEARS_API, "username", "alice", "h", 7]),
    "attach without its wait": (wire.ATTACH, [*AT_V, ""]),
    "attach with a wait in exponent form": (wire.ATTACH, [*AT_V, "", "1e300"]),
    "a vector naming an unknown region": (wire.ATTACH, [*AT_V, "atlantis:3", 0]),
    "a vector entry without its ts": (wire.ATTACH, [*AT_V, "ireland", 0]),
    "read with a fractional count": (wire.READ, [wire.GEARS_API, *ZERO, "1.5", "all", "r", 0, 0, "", 0, 0]),
    "write of another API version": (wire.WRITE, ["0", 0, 0, "", "", 1, "all", "r", 1, "s", "c", "v"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_every_client_gear_refuses_bad_input_and_writes_nothing(redis_url: str, case: str):
    async def scenario() -> None:
        store = await installed(redis_url)
        await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"v"))])
        before = snapshot(redis_url)
        function, args = BAD_CALLS[case]
        with pytest.raises(CausalError):
            await store.shards[0].call(function, args)
        assert snapshot(redis_url) == before

    run(scenario())


def test_a_read_as_of_a_time_sees_a_quiet_rows_state_before_its_change(redis_url: str):
    """A row whose versions expired (quiet for longer than they are kept, or written before
    versions existed) changes: a read as of a time before that change still sees the cell and
    the counter as they were (the first version keeps the value it replaces)."""

    async def scenario() -> None:
        store = await installed(redis_url)
        await store.write(Label.zero(), [mutation("all", "quiet", ("s", "c", b"v1"), ("i", "n", 2))])
        redis.Redis.from_url(redis_url).delete("h:all:quiet", "b:all:quiet")  # as if expired
        made = await store.write(Label.zero(), [mutation("all", "quiet", ("s", "c", b"v2"), ("i", "n", 3))])
        reads = [ReadSpec("all", "quiet").gear_args()]
        for at, value, count in ((made.ts - 1, "v1", 2), (made.ts, "v2", 5)):
            reply = await store.shards[0].call(wire.READ_AT, read_args(Label.zero(), at, [], reads))
            row, _ = Row.from_gear("all", "quiet", reply[2])
            assert (row.text("c"), row.counter("n"), row.size) == (value, count, 2)

    run(scenario())


def test_a_skewed_clock_moves_every_ts_it_makes_and_a_jump_back_reorders_nothing(redis_url: str):
    """The clock nemesis's lever (gears.CLOCK_KEY): a shard's offset moves the ts of its labels
    and heartbeats with it, and when the clock jumps back every ts it makes stays above the last
    (a receiver takes an origin's label at or below its watermark for a duplicate, so a ts that
    went back would be a write lost everywhere else)."""
    key = gears.shard_key(gears.CLOCK_KEY, wire.shard_tag(0))
    db = redis.Redis.from_url(redis_url)

    async def scenario() -> None:
        store = await installed(redis_url)
        db.set(key, 400_000)  # 400 ms ahead
        ahead = await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"1"))])
        now_us = int(db.time()[0]) * 1_000_000 + int(db.time()[1])
        assert 350_000 < ahead.ts - now_us < 450_000
        db.set(key, -400_000)  # then 800 ms back
        beat = await store.shards[0].heartbeat()
        after = await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"2"))])
        assert ahead.ts <= beat < after.ts  # a heartbeat promises nothing below what was made
        db.delete(key)
        right = await store.write(Label.zero(), [mutation("all", "r", ("s", "c", b"3"))])
        assert after.ts < right.ts

    run(scenario())
