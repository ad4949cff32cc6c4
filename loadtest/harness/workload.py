"""The operations measured: the same reads and writes through the client library and straight
against Redis, on the same keys in the same order, so that their ratio is the causal layer's price."""

from __future__ import annotations

import random
from dataclasses import dataclass

import redis

from causal_client import CausalClient, Mutation
from loadtest.harness.loop import Op

COLUMN = "v"
MIX_READ_FRACTION = 0.9
PRELOAD_BATCH = 500  # rows per Batch call while preloading (the server takes up to 1000)


@dataclass(frozen=True)
class Workload:
    group: str
    keys: int
    value: bytes

    def row(self, index: int) -> str:
        return f"bench:{index}"

    def raw_key(self, index: int) -> str:
        return f"bench-raw:{index}"  # a name the store's own keys (d:/i:/c: prefixes) never take


def _is_write(kind: str, rng: random.Random) -> bool:
    """Whether the next operation of ``kind`` writes (a mix draws: one in ten on average)."""
    return kind == "write" or (kind == "mix" and rng.random() >= MIX_READ_FRACTION)


def causal_op(client: CausalClient, region: str, kind: str, work: Workload, seed: int, index: int) -> Op:
    """Client ``index``'s operation through the client library, with a session of its own (as one
    user of an application); the gRPC channel is shared, as an application shares its client."""
    session = client.session(region)
    rng = random.Random(seed + index)
    columns = [COLUMN]

    def op() -> bool:
        row = work.row(rng.randrange(work.keys))
        if _is_write(kind, rng):
            session.write(work.group, row, {COLUMN: work.value})
            return True
        session.read(work.group, row, columns)
        return False

    return op


def raw_op(db: redis.Redis, kind: str, work: Workload, seed: int, index: int) -> Op:
    """The same operation done with redis-py straight against the region's Redis (the clients
    share one connection pool, as threads of an application do)."""
    rng = random.Random(seed + index)

    def op() -> bool:
        key = work.raw_key(rng.randrange(work.keys))
        if _is_write(kind, rng):
            db.hset(key, COLUMN, work.value)
            return True
        db.hget(key, COLUMN)
        return False

    return op


def preload(client: CausalClient, db: redis.Redis, region: str, work: Workload) -> int:
    """Writes every key once both ways, so that reads find a value; returns the causal writes."""
    session = client.session(region)
    for start in range(0, work.keys, PRELOAD_BATCH):
        indexes = range(start, min(start + PRELOAD_BATCH, work.keys))
        session.batch(
            [Mutation(work.group, work.row(i)).set(COLUMN, work.value) for i in indexes], atomic=False
        )
    pipe = db.pipeline(transaction=False)
    for i in range(work.keys):
        pipe.hset(work.raw_key(i), COLUMN, work.value)
    pipe.execute()
    return work.keys
