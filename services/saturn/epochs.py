"""Trees by epoch: which serializer tree a region uses, and the next one (paper §6.2).

A region's tree record, a hash in its shard 0 (``gears.TREE_KEY``), names the newest tree,
``epoch`` and ``topology`` (JSON), and ``send``, the epoch whose tree the label sink must send on:
written by whoever deploys (the launcher, at start and on ``reconfigure``), with an entry in the
capped stream ``gears.TREE_EVENTS`` that wakes the label sink (it blocks on it: nothing polls). A
reconfiguration names the new tree first (proxies then accept its links, so its serializers
connect at once) and sets ``send`` once they run. The region reports how far it has moved:
``sink``, the epoch the sink sends on, and ``proxy``, the epoch whose labels the proxy delivers.
The record lives in the store so that a process restarted in the middle of a switch takes the
current tree, and so that a deployment is reconfigured through the stores it already reaches.
"""

from __future__ import annotations

import json
import os
import time

import redis
from redis.typing import EncodableT, FieldT

from services.region import gears
from services.region.store import Shard
from services.region.sync_shard import SyncShard
from services.topology import Topology, TopologyError

EPOCH, TOPOLOGY, SEND, SINK, PROXY = "epoch", "topology", gears.TREE_SEND_FIELD, "sink", "proxy"
TREE_EVENTS_KEPT = 16


def next_tree(running: Topology, new: Topology) -> Topology:
    """The running topology with ``new``'s serializers and tree, one epoch on. Everything else
    (regions, shards, groups, ports, latencies) stays as it runs: only the tree may change."""
    if not running.traits.tree:
        raise TopologyError(f"{running.name} runs {running.protocol}: only saturn has a tree to change")
    shape = {r.name: (r.site, r.shards) for r in running.regions}
    offered = {r.name: (r.site, r.shards) for r in new.regions}
    if offered != shape:
        raise TopologyError(
            f"{new.source}: its regions (name: site, shards) {offered} differ from the running {shape}; "
            "a reconfiguration changes the serializers and the tree only"
        )
    data = running.model_dump()
    data.update(new.model_dump(include={"serializers", "tree"}), epoch=running.epoch + 1)
    return Topology.from_dict(data, source=new.source)


def record_for(topology: Topology) -> dict[str, str]:
    return {EPOCH: str(topology.epoch), TOPOLOGY: topology.model_dump_json()}


def tree_from_record(record: dict[str, str], source: str) -> Topology | None:
    if TOPOLOGY not in record:
        return None
    return Topology.from_dict(json.loads(record[TOPOLOGY]), source=source).with_env_hosts(os.environ)


async def current_tree(shard: Shard, fallback: Topology) -> Topology:
    """The tree the region's record names, or ``fallback`` (the process's own topology) where
    none was published (a deployment that never reconfigures)."""
    return tree_from_record(await shard.tree_record(), fallback.source) or fallback


def _first_shard_key(topology: Topology, region: str, *names: str) -> list[str]:
    """The region's first shard's keys of these names (the tree record lives there)."""
    return [gears.shard_key(name, topology.shard_tag(region, 0)) for name in names]


def publish(
    topology: Topology,
    start: bool = False,
    send: bool = True,
    regions: list[str] | None = None,
    reach: Topology | None = None,
) -> None:
    """Names ``topology``'s tree in every region's record (or those of ``regions``); ``send``:
    and has their sinks send on it. ``start``: a deployment starting, whose sinks and proxies
    report their progress afresh. ``reach``: the same deployment as seen from where this runs
    (a compose project's stores are reached at published addresses, not at the hosts its own
    processes use, which is what the record must name)."""
    fields: dict[FieldT, EncodableT] = dict(record_for(topology).items())
    if send:
        fields[SEND] = str(topology.epoch)
    for region in topology.region_names if regions is None else regions:
        tree_key, events = _first_shard_key(topology, region, gears.TREE_KEY, gears.TREE_EVENTS)

        def write(store: redis.Redis, tree_key: str = tree_key, events: str = events) -> None:
            pipe = store.pipeline(transaction=True)
            if start:
                pipe.delete(tree_key)
            pipe.hset(tree_key, mapping=fields)
            pipe.xadd(events, {EPOCH: str(topology.epoch)}, maxlen=TREE_EVENTS_KEPT, approximate=False)
            pipe.execute()

        with SyncShard(reach or topology, region) as shard:
            shard.run(write)


def progress(topology: Topology) -> dict[str, dict[str, int]]:
    """Per region, the epochs its sink and proxy report (-1: not yet reported)."""
    found = {}
    for region in topology.region_names:
        (tree_key,) = _first_shard_key(topology, region, gears.TREE_KEY)

        def read(store: redis.Redis, tree_key: str = tree_key) -> dict[bytes, bytes]:
            return store.hgetall(tree_key)  # type: ignore[return-value]  # (redis-py's sync/async union)

        with SyncShard(topology, region) as shard:
            record = shard.run(read)
        found[region] = {f: int(record.get(f.encode(), -1)) for f in (SINK, PROXY)}
    return found


def wait_moved(epoch: int, reach: Topology, timeout: float) -> None:
    """Until every region's sink sends on the tree of ``epoch`` and its proxy delivers that
    tree's labels (``reach``: where the stores are reached from here). Raises TimeoutError
    naming the regions behind."""
    deadline = time.monotonic() + timeout
    while True:
        found = progress(reach)
        behind = sorted(r for r, at in found.items() if min(at.values()) < epoch)
        if not behind:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{behind} did not move to epoch {epoch} in {timeout:.0f}s: {found}")
        time.sleep(0.02)
