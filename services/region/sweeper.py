"""Settles the parts of transactions whose writer went away (causal_client/transactions.py).

A client that dies between staging a batch's parts and settling them (or a remote proxy that
crashes while applying a batch across shards) leaves parts staged: invisible, and making every
reader of their rows ask the coordinator. Every second the sweeper asks each shard for parts staged
longer than ``STUCK_S`` ago and settles them as their coordinator decided: committed parts are
applied at the commit stamp; a transaction still undecided is aborted there first (a writer that
comes back later is told so, ``TransactionAborted``, and has written nothing). It runs in every
region's bulk-receiver process, whatever the protocol.
"""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import RedisError

from causal_client import wire
from causal_client.errors import CausalError
from services import runtime
from services.region.store import RegionStore

log = logging.getLogger("sweeper")

STUCK_S = 2.0  # a part staged this long is its writer's no more (a batch takes milliseconds)
PERIOD_S = 1.0
BATCH = 100  # parts looked at per shard and round


async def sweep_once(store: RegionStore, stuck_s: float = STUCK_S) -> int:
    """Settles every part staged longer than ``stuck_s`` ago; returns how many."""
    settled = 0
    for shard in store.shards:
        for txid, coordinator, _mode in await shard.call("saturn_stuck", [round(stuck_s * 1e6), BATCH]):
            txid, coordinator = txid.decode(), coordinator.decode()
            owner = store.shards[int(coordinator.rsplit("/", 1)[1])] if coordinator else shard
            (answer,) = await owner.call(wire.TXN_CHECK, [wire.GEARS_API, 0, 1, txid])
            committed = answer[0] == b"c"
            stamp = int(answer[1]) if committed else 0
            await shard.call(wire.SETTLE, [txid, "c" if committed else "a", stamp])
            log.warning("%s: transaction %s %s", shard.gear_id, txid, "applied" if committed else "aborted")
            settled += 1
    return settled


async def sweep_forever(store: RegionStore, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await runtime.sleep_or_stop(stop, PERIOD_S)
        try:
            await sweep_once(store)
        except (RedisError, OSError, CausalError) as exc:  # a shard restarting: next round
            log.warning("%s: %s", store.region, exc)
