"""The bulk sender's shared tail of a gear's stream (services/bulk/tail.py), against a real Redis:
every shipper gets every entry once and in order, whether from memory or, when it is behind what
memory holds, from Redis; and memory lets go of what every shipper has taken."""

from __future__ import annotations

import asyncio

import pytest
import redis
from helpers.topologies import load_topology
from helpers.waiting import eventually

from causal_client import wire
from causal_client.data import Mutation
from causal_client.label import Label
from services.bulk import tail as tail_module
from services.bulk.sender import Trimmer
from services.bulk.tail import GearTail
from services.region import gears
from services.region.store import RegionStore, Shard

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def add(url: str, first: int, last: int, group: str = "all") -> None:
    with redis.Redis.from_url(url) as store:
        pipe = store.pipeline(transaction=False)
        for ts in range(first, last + 1):
            pipe.xadd(
                gears.shard_key(gears.BULK_STREAM, wire.shard_tag(0)),
                {"g": group, "p": f"u{ts}".encode()},
                id=f"{ts}-0",
            )
        pipe.execute()


async def take(tail: GearTail, shipper: object, position: int, until: int) -> list[int]:
    """What a shipper would ship: entries after ``position`` until it has covered ``until``."""
    seen: list[int] = []
    while position < until:
        found = await tail.after(shipper, position, 0.5)
        entries, through = found if found is not None else await tail.catch_up(position)
        assert through >= position, "a tail never goes back"
        assert all(ts > position for ts, *_ in entries)
        seen += [ts for ts, *_ in entries]
        position = through
    return seen


def run_with_tail(url: str, body) -> object:
    async def main():
        shard = Shard(url, "a/0", "a", wire.shard_tag(0))
        tail = GearTail(shard, heartbeat_s=0.01)
        stop = asyncio.Event()
        reader = asyncio.create_task(tail.run(stop))
        try:
            return await asyncio.wait_for(body(tail), 20)
        finally:
            stop.set()
            await reader
            await shard.close()

    return asyncio.run(main())


def test_every_shipper_gets_every_entry_once_in_order(redis_url):
    add(redis_url, 1, 300)

    async def body(tail: GearTail):
        async def writer():
            for start in range(301, 2001, 100):
                add(redis_url, start, start + 99)
                await asyncio.sleep(0.01)

        shippers = [object(), object(), object()]
        results, _ = await asyncio.gather(
            asyncio.gather(*(take(tail, s, 0, 2000) for s in shippers)), writer()
        )
        return results

    for seen in run_with_tail(redis_url, body):
        assert seen == list(range(1, 2001))


def test_a_shipper_behind_memory_reads_redis_and_then_memory(redis_url, monkeypatch):
    """With little memory the fast shipper makes the tail let go of entries the slow one has not
    taken: the slow one must get them from Redis, none lost, none twice."""
    monkeypatch.setattr(tail_module, "HELD_MAX", 50)
    add(redis_url, 1, 1000)

    async def body(tail: GearTail):
        fast, slow = object(), object()
        assert await take(tail, fast, 0, 1000) == list(range(1, 1001))
        assert tail.floor >= 950, "memory holds at most HELD_MAX entries"
        assert await tail.after(slow, 10, 0.1) is None, "below the floor: read Redis"
        return await take(tail, slow, 10, 1000)

    assert run_with_tail(redis_url, body) == list(range(11, 1001))


def test_memory_lets_go_of_what_every_shipper_took(redis_url):
    add(redis_url, 1, 100)

    async def body(tail: GearTail):
        a, b = object(), object()
        await take(tail, a, 0, 100)
        await take(tail, b, 0, 40)
        await tail.after(a, 100, 0.01)  # a shipper tells its position when it asks again
        await tail.after(b, 40, 0.01)
        tail._let_go()
        held_while_b_lags = len(tail.entries)
        tail.leave(b)
        tail._let_go()
        return held_while_b_lags, len(tail.entries), tail.floor

    held, after_leaving, floor = run_with_tail(redis_url, body)
    assert held == 60, "b's entries are kept for b"
    assert (after_leaving, floor) == (0, 100)


@pytest.mark.parametrize("position", [0, 5_000])
def test_an_idle_stream_is_waited_on_not_spun(redis_url, position):
    """No news: after() waits its time and returns nothing new, as often as asked."""

    async def body(tail: GearTail):
        loop = asyncio.get_running_loop()
        began = loop.time()
        found = await tail.after(object(), position, 0.2)
        return found, loop.time() - began

    found, waited = run_with_tail(redis_url, body)
    assert found == ([], position)
    assert waited >= 0.19


def test_a_store_that_restarts_is_read_again_where_the_tail_was(tmp_path):
    """The store's Redis restarts (the checker's store fault): the tail's blocking read fails,
    and it reads again after the entries it had, never giving up (a tail that died with its
    read left its sender shipping nothing, once)."""
    import socket
    import subprocess

    from services.launcher.redis_binary import find_redis_server
    from services.probes import redis_ping

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    argv = [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path),
            "--appendonly", "yes", "--appendfsync", "always", "--save", ""]  # fmt: skip

    def start() -> subprocess.Popen:
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        eventually(lambda: redis_ping("127.0.0.1", port), timeout=10)  # (its AOF loaded: not LOADING)
        return server

    server = start()
    try:
        add(url, 1, 5)

        async def body(tail: GearTail) -> list[int]:
            nonlocal server
            first = await take(tail, "shipper", 0, 5)
            server.kill()
            server.wait(10)
            await asyncio.sleep(0.5)  # the tail's read fails meanwhile, and again
            server = await asyncio.get_running_loop().run_in_executor(None, start)
            add(url, 6, 9)
            return first + await take(tail, "shipper", 5, 9)

        assert run_with_tail(url, body) == list(range(1, 10))
    finally:
        server.kill()
        server.wait(10)


def test_the_bulk_stream_keeps_what_the_label_sink_has_not_passed(redis_url: str):
    """Saturn's labels ride in the bulk entries, and the sink reads them there: the trimmer
    trims below what every destination acknowledged *and* below the sink's saved cursor, so a
    restarted sink still finds every label it had not forwarded."""
    topology = load_topology("demo-3region.toml", protocol="saturn")
    assert gears.labels_stream(topology.traits) == gears.BULK_STREAM

    async def scenario() -> None:
        store = RegionStore(topology, "virginia", urls=[redis_url])
        await store.install()
        shard = store.shards[0]
        rows = [[Mutation("all", f"r{i}", [("s", "c", b"v")])] for i in range(6)]
        made = [(await store.write(Label.zero(), row)).ts for row in rows]
        trimmer = Trimmer(topology, "virginia", ["ireland"])
        trimmer.shards = {shard.gear_id: shard}
        trimmer.positions = {shard.gear_id: {}}
        trimmer.acked(shard.gear_id, "ireland", made[-1])  # every destination has everything
        await shard.save_sink_cursor(made[2])  # the sink has passed the first three labels
        stop = asyncio.Event()
        trimming = asyncio.create_task(trimmer.run(stop, period_s=0.05))
        await asyncio.sleep(0.3)
        left = [ts for ts, _ in await shard.stream_after(gears.BULK_STREAM, 0, 100)]
        assert left == made[3:], "what the sink has not passed stays"
        await shard.save_sink_cursor(made[-1])
        await asyncio.sleep(0.3)
        stop.set()
        await trimming
        assert await shard.stream_after(gears.BULK_STREAM, 0, 100) == []
        await store.close()

    asyncio.run(scenario())
