"""The services' lean store client (services/region/lean_redis.py) against a real Redis: replies
in order under pipelining, blocking reads on connections of their own, redis-py's error types,
credentials, an unreachable store and a stuck one."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from urllib.parse import quote

import pytest
from helpers.deadlines import Deadline, scaled, wait_for
from redis.exceptions import AuthenticationError, ConnectionError, ResponseError, TimeoutError

from services.launcher.redis_binary import find_redis_server
from services.region.lean_redis import LeanRedis

pytestmark = pytest.mark.cluster  # starts Redis servers


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, scaled(20)))


def test_pipelined_calls_get_their_own_replies(redis_url: str):
    async def scenario():
        client = LeanRedis(redis_url)
        await client.execute("SET", "k", "v")
        replies = await asyncio.gather(*(client.execute("ECHO", str(i)) for i in range(200)))
        assert replies == [str(i).encode() for i in range(200)]
        assert await client.execute("GET", "k") == b"v"
        assert await client.execute("GET", "missing") is None
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            await client.execute("GET")
        assert await client.execute("INCR", "n") == 1  # the connection is still good
        await client.close()

    run(scenario())


def test_a_blocking_read_does_not_hold_up_other_calls(redis_url: str):
    async def scenario():
        client, writer = LeanRedis(redis_url), LeanRedis(redis_url)
        read = asyncio.ensure_future(
            client.execute_blocking("XREAD", "BLOCK", 5000, "STREAMS", "s", "$", block_s=5)
        )
        blocked = Deadline(5, "the XREAD blocked at the server")  # (else it misses the XADD below)
        while b"blocked_clients:1" not in await writer.execute("INFO", "clients"):
            if blocked.expired():
                raise blocked.fail()
            await asyncio.sleep(0.01)
        blocked.met()
        started = time.monotonic()
        assert await client.execute("PING") == b"PONG"  # the shared connection is free
        assert time.monotonic() - started < 1
        await writer.execute("XADD", "s", "*", "f", "v")
        ((stream, ((_, fields),)),) = await read
        assert stream == b"s" and fields == [b"f", b"v"]
        await client.close()
        await writer.close()

    run(scenario())


def test_credentials_are_presented_and_wrong_ones_refused(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = 'p@ss w:rd/"x"'
    server = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--requirepass", secret],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: listens(port), 10, "redis-server listening", interval=0.02)

        async def scenario():
            good = LeanRedis(f"redis://:{quote(secret, safe='')}@127.0.0.1:{port}/0")
            assert await good.execute("PING") == b"PONG"
            await good.close()
            with pytest.raises(AuthenticationError):
                await LeanRedis(f"redis://:wrong@127.0.0.1:{port}/0").execute("PING")
            with pytest.raises(AuthenticationError, match="required"):  # as redis-py says it
                await LeanRedis(f"redis://127.0.0.1:{port}/0").execute("PING")

        run(scenario())
    finally:
        server.terminate()
        server.wait(scaled(10))


def listens(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_an_unreachable_store_and_a_stuck_one_raise_redis_errors(redis_url: str):
    async def scenario():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            free = sock.getsockname()[1]
        with pytest.raises(ConnectionError, match="cannot reach"):
            await LeanRedis(f"redis://127.0.0.1:{free}/0").execute("PING")
        impatient = LeanRedis(redis_url, timeout_s=0.2)
        with pytest.raises(TimeoutError, match="did not answer"):
            await impatient.execute("BLPOP", "nothing", 2)  # blocks at the server past the timeout
        assert await impatient.execute("PING") == b"PONG"  # a new connection
        await impatient.close()

    run(scenario())
