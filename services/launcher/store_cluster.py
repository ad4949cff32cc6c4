"""Makes each region's Redis Cluster out of its store nodes (``[store] engine = "cluster"``).

Redis's own commands do it, as ``redis-cli --cluster create`` would, with one difference: the
slots are split so that shard k's slot (that of its hash tag ``{sk}``) is on master k mod
masters, which ``--cluster create``'s even ranges would not give (a tag's slot is where its
CRC-16 puts it). Every slot is served (a cluster with an unserved slot refuses every call),
each by the master of the shard whose tag's slot is the next one up. Then the nodes meet, each
replica follows its master, and the cluster is ready once every node says ``cluster_state:ok``.

A node keeps its membership in ``nodes.conf`` in its data directory: a node restarted (by the
supervisor, or by a later ``up`` on the same data) rejoins by itself, and forming a cluster
that is formed already does nothing.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import redis
from redis.backoff import NoBackoff
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.retry import Retry

from causal_client import tls, wire
from services.plan import ANNOUNCEABLE_HOST
from services.region import gears
from services.topology import Topology


class ClusterFormError(RuntimeError):
    """A region's cluster did not come together; the message says which step and node."""


def shard_slot(shard: int) -> int:
    return key_slot(wire.shard_tag(shard).encode())


def master_slots(placement: list[int], masters: int) -> list[list[tuple[int, int]]]:
    """Per master, the slot ranges (first, last) it serves at first: shard k's slot on master
    ``placement[k]`` (``Topology.shard_node``), and every slot with the shard whose slot is the
    next one at or above it (those above the highest shard's slot with the lowest's)."""
    by_slot = sorted((shard_slot(k), master) for k, master in enumerate(placement))
    owner = [by_slot[0][1]] * REDIS_CLUSTER_HASH_SLOTS
    low = 0
    for slot, master in by_slot:
        owner[low : slot + 1] = [master] * (slot + 1 - low)
        low = slot + 1
    ranges: list[list[tuple[int, int]]] = [[] for _ in range(masters)]
    first = 0
    for slot in range(1, REDIS_CLUSTER_HASH_SLOTS + 1):
        if slot == REDIS_CLUSTER_HASH_SLOTS or owner[slot] != owner[first]:
            ranges[owner[first]].append((first, slot - 1))
            first = slot
    return ranges


@contextmanager
def _nodes(
    topology: Topology, region: str, password: str | None, retries: bool = True
) -> Iterator[list[redis.Redis]]:
    """A client per node of the region; ``retries=False``: a node that does not answer is
    passed over at once (asking who serves a shard while its master is down), else redis-py's
    retries wait out a node that is starting (forming the cluster, moving a shard)."""
    host = topology.node_host(region)

    def client(k: int) -> redis.Redis:
        port = topology.redis_port(region, k)
        secure = tls.redis_options()
        if retries:
            return redis.Redis(host=host, port=port, password=password, socket_timeout=10, **secure)  # type: ignore[arg-type]
        return redis.Redis(
            host=host, port=port, password=password, socket_timeout=10, socket_connect_timeout=2,
            retry=Retry(NoBackoff(), 0), **secure,  # type: ignore[arg-type]
        )  # fmt: skip

    with ExitStack() as stack:
        yield [stack.enter_context(client(k)) for k in range(topology.store_nodes(region))]


def _info(node: redis.Redis) -> dict[str, str]:
    text = node.execute_command("CLUSTER", "INFO")
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.split() if ":" in line)


def _formed(info: dict[str, str], nodes: int) -> bool:
    """A node that knows every node and sees every slot assigned (a lone node knows itself)."""
    return info.get("cluster_known_nodes") == str(nodes) and info.get("cluster_slots_assigned") == str(
        REDIS_CLUSTER_HASH_SLOTS
    )


def _wait(what: str, done, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise ClusterFormError(f"{what} within {timeout:.0f}s")
        time.sleep(0.05)


def form(topology: Topology, region: str, password: str | None, timeout: float = 30.0) -> None:
    """Forms ``region``'s cluster unless it is formed; returns once every slot is served."""
    store = topology.store
    masters, shards = store.masters, topology.region(region).shards
    with _nodes(topology, region, password) as nodes:
        named = bool(ANNOUNCEABLE_HOST.match(topology.node_host(region)))
        if all(_formed(_info(n), len(nodes)) for n in nodes):
            _wait_ok(region, nodes, named, timeout)  # formed before (nodes.conf): it comes back by itself
            return
        placement = [topology.shard_node(region, k) for k in range(shards)]
        ip = socket.gethostbyname(topology.node_host(region))
        for k, (node, ranges) in enumerate(zip(nodes, master_slots(placement, masters), strict=False)):
            if _info(node).get("cluster_slots_assigned") == "0":
                node.execute_command("CLUSTER", "ADDSLOTSRANGE", *(bound for r in ranges for bound in r))
                node.execute_command("CLUSTER", "SET-CONFIG-EPOCH", k + 1)  # no two masters alike
        for k in range(1, len(nodes)):
            nodes[0].execute_command(
                "CLUSTER", "MEET", ip, topology.redis_port(region, k), topology.cluster_bus_port(region, k)
            )
        everyone = str(len(nodes))
        _wait(
            f"{region}'s store nodes did not all meet",
            lambda: all(_info(n).get("cluster_known_nodes") == everyone for n in nodes),
            timeout,
        )
        ids = [n.execute_command("CLUSTER", "MYID") for n in nodes]
        for k in range(masters, len(nodes)):
            master = (k - masters) % masters
            _replicate(region, nodes[k], ids[master], timeout)
        _wait_ok(region, nodes, named, timeout)


def _replicate(region: str, replica: redis.Redis, master_id: bytes, timeout: float) -> None:
    """Makes a node its master's replica: the node must first have heard of the master through
    the cluster bus (REPLICATE of a node it does not know yet fails)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            replica.execute_command("CLUSTER", "REPLICATE", master_id)
            return
        except redis.ResponseError as exc:
            if time.monotonic() > deadline:
                raise ClusterFormError(f"{region}: a replica could not follow its master: {exc}") from None
            time.sleep(0.05)


def _synced(node: redis.Redis) -> bool:
    """A master, or a replica whose link to its master is up."""
    info = node.info("replication")
    return info.get("role") != "slave" or info.get("master_link_status") == "up"


def _hostnames_known(node: redis.Redis, nodes: int) -> bool:
    """Whether ``node`` knows every node's hostname (``CLUSTER NODES``' ``ip:port@bus,hostname``):
    until the cluster's gossip has brought them, a MOVED would name a node as ``?``."""
    lines = _text(node.execute_command("CLUSTER", "NODES")).splitlines()
    return len(lines) == nodes and all(line.split()[1].partition(",")[2] for line in lines)


def _wait_ok(region: str, nodes: list[redis.Redis], named: bool, timeout: float) -> None:
    """Until every slot is served, every replica has its master's data (a write acknowledged
    once a replica has it would wait for the first sync otherwise) and, where nodes announce
    hostnames (``named``), every node knows every other's."""
    _wait(
        f"{region}'s store cluster did not serve every slot",
        lambda: all(_info(n).get("cluster_state") == "ok" for n in nodes),
        timeout,
    )
    _wait(
        f"{region}'s store replicas did not all sync with their masters",
        lambda: all(_synced(n) for n in nodes),
        timeout,
    )
    if named:
        _wait(
            f"{region}'s store nodes did not learn each other's hostnames",
            lambda: all(_hostnames_known(n, len(nodes)) for n in nodes),
            timeout,
        )


MIGRATE_BATCH = 100  # keys a MIGRATE moves at once
MIGRATE_TIMEOUT_MS = 10_000


def _node_ids(nodes: list[redis.Redis]) -> list[str]:
    return [_text(n.execute_command("CLUSTER", "MYID")) for n in nodes]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def master_of(topology: Topology, region: str, shard: int, password: str | None) -> int:
    """Which of the region's nodes serves the shard now (by the first node that answers)."""
    slot = shard_slot(shard)
    ports = [topology.redis_port(region, k) for k in range(topology.store_nodes(region))]
    with _nodes(topology, region, password, retries=False) as nodes:
        for node in nodes:
            try:
                slots = node.execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for first, last, master, *_ in slots:
                if first <= slot <= last:
                    return ports.index(int(master[1]))
    raise ClusterFormError(f"{region}: no node says who serves shard {shard}")


def move_shard(topology: Topology, region: str, shard: int, to_node: int, password: str | None) -> float:
    """Moves a shard (its slot, every key of it) to another master of the region's cluster while
    the region serves; returns the seconds its calls were held. Redis's resharding, with one
    addition: the shard is fenced first (``gears.MOVING_FIELD``: every gear call on it answers
    MOVING and is made again by its caller), so that no call ever runs on a node holding part
    of its keys. The target gets the gears' library first; the fence travels with the keys and is
    lifted at the target once the cluster says the slot is there."""
    slot, tag = shard_slot(shard), wire.shard_tag(shard)
    config = gears.shard_key(gears.CONFIG_KEY, tag)
    source_k = master_of(topology, region, shard, password)
    if source_k == to_node:
        return 0.0
    with _nodes(topology, region, password) as nodes:
        source, target = nodes[source_k], nodes[to_node]
        if target.info("replication")["role"] != "master":
            raise ClusterFormError(f"{region}: node {to_node} is a replica; a shard moves to a master")
        ids = _node_ids(nodes)
        target.execute_command("FUNCTION", "RESTORE", source.function_dump(), "REPLACE")
        started = time.monotonic()
        source.hset(config, gears.MOVING_FIELD, "1")
        target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[source_k])
        source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to_node])
        host, port = topology.node_host(region), topology.redis_port(region, to_node)
        auth_args = ["AUTH", password] if password else []
        while keys := source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, MIGRATE_BATCH):
            source.execute_command(
                "MIGRATE", host, port, "", 0, MIGRATE_TIMEOUT_MS, *auth_args, "KEYS", *keys
            )
        masters = [n for n in nodes if n.info("replication")["role"] == "master"]
        for node in [target, source, *(n for n in masters if n not in (target, source))]:
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[to_node])
        target.hdel(config, gears.MOVING_FIELD)
        return time.monotonic() - started
