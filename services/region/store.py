"""A region's view of its shards: reads, gear writes, migrations and remote applies over Redis."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import AskError, ClusterDownError, MovedError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as StoreConnectionError
from redis.exceptions import TimeoutError as StoreTimeoutError
from redis.typing import EncodableT, FieldT

from causal_client import errors, tls, transactions, wire
from causal_client.data import Mutation, ReadSpec
from causal_client.errors import gear_error
from causal_client.label import Label, LabelType
from services.region import gears
from services.region.following import follows_cluster, follows_cluster_once, moved_url
from services.region.lean_redis import LeanRedis
from services.region.remote_update import RemoteUpdate, RowChange, deps_text, rows_args, staged_rows
from services.topology import Topology

T = TypeVar("T")


def _flat_entries(raw: list) -> list[tuple[int, dict[bytes, bytes]]]:
    """Stream entries as RESP has them (id, [field, value, ...]) as (ts, fields)."""
    return [(int(entry_id.split(b"-", 1)[0]), dict(zip(f[::2], f[1::2], strict=True))) for entry_id, f in raw]


def _watermarks(raw: Mapping[bytes | str, bytes | str]) -> dict[str, int]:
    """The watermark hash as Redis returns it -> origin region: ts (c3's other fields, named
    with a prefix, too: region names have no colon)."""
    return {_text(k): int(v) for k, v in raw.items()}


def _text(reply: bytes | str) -> str:
    """A string in a reply: bytes from these clients (they do not decode replies), though
    redis-py's types allow either."""
    return reply.decode() if isinstance(reply, bytes) else reply


ACK_TIMEOUT_MS = 5000  # how long a client's change may wait for its replicas (then: outcome unknown)
NO_FUNCTION = "Function not found"  # how Redis answers an FCALL of a library it does not have
MOVING = "MOVING "  # a gear's answer while its shard moves between masters (checks.lua)


class HiredisPacking:
    """Commands packed by hiredis (C), where redis-py's asyncio client packs each argument in
    Python: a remote proxy's run of updates is one call with hundreds of arguments, and packing
    them was a sixth of the receiver's CPU (7x less here)."""

    def pack_command(self, *args):
        if isinstance(args[0], str) and " " in args[0]:  # "CLIENT SETNAME"-style, as redis-py splits
            args = (*args[0].split(), *args[1:])
        return [hiredis.pack_command(args)]


class PackedByHiredis(HiredisPacking, aioredis.Connection):
    pass


class PackedByHiredisTls(HiredisPacking, aioredis.SSLConnection):
    pass


def async_client(url: str, **options: Any) -> aioredis.Redis:
    """redis-py's asyncio client of a store at ``url``, its commands packed by hiredis, under the
    deployment's TLS if the URL is ``rediss://`` (redis-py would then pick its own connection
    class: the scheme is read here instead)."""
    secure = url.startswith("rediss://")
    if secure:
        url = "redis://" + url.removeprefix("rediss://")
        options.update(tls.redis_options(for_url=True))
    return aioredis.Redis.from_url(
        url, connection_class=PackedByHiredisTls if secure else PackedByHiredis, **options
    )


class Shard:
    """One shard: its keys (in a Redis server running the gears' library, each carrying the
    shard's hash tag ``tag``), and the gear that owns them. Gear calls and stream reads go
    through ``lean`` (the hot path: lean_redis.py), the rest through redis-py."""

    def __init__(
        self, url: str, gear_id: str, region: str, tag: str, acks: int = 0, nodes: Sequence[str] = ()
    ):
        """``acks``: replicas that must have a client's change before it counts as made (a Redis
        Cluster store's, ``[store] acknowledge``). ``nodes``: on a Redis Cluster, the URLs of
        the region's every node, where the shard is looked for after its master was lost."""
        self.gear_id = gear_id
        self.region = region
        self.tag = tag
        self.acks = acks
        self.nodes = list(nodes)
        self._connect(url)

    def _connect(self, url: str) -> None:
        self.url = url
        self.redis = async_client(url, socket_timeout=30, max_connections=256)
        self.lean = LeanRedis(url)

    async def _move(self, url: str) -> None:
        """From now on the shard is reached at ``url`` (calls in flight on the old connections
        fail as a lost connection would, and their callers retry)."""
        old_lean = self.lean
        self._connect(url)
        await old_lean.close()  # redis-py's client is left to go (closing it under a caller breaks it)

    async def follow_cluster(self, error: Exception) -> bool:
        """After ``error`` from a call: whether to make the call again. On a Redis Cluster a
        ``MOVED`` (the call was not made) moves the shard to the master named, and a lost
        connection moves it to the region's next node, which serves it if it was promoted and
        names the master that does (``MOVED``) if not."""
        if isinstance(error, MovedError):
            await self._move(moved_url(self.url, error))
            return True
        if isinstance(error, (StoreConnectionError, OSError)) and self.nodes:
            await self._move(wire.node_after(self.nodes, self.url))
        return False

    @follows_cluster
    async def install(
        self,
        settings: Mapping[FieldT, EncodableT],
        groups: Mapping[FieldT, EncodableT],
        gear_ids: list[str],
        about: str,
    ) -> None:
        """Loads the gears' library (replacing any other version) and the region's settings they
        check calls against; atomic, so a call sees the old settings or the new ones. A keyed
        read first: on a Redis Cluster it finds the shard's master (a MOVED, followed), where the
        keyless FUNCTION LOAD alone would reach a replica, promoted away from, and be refused
        (READONLY): a gateway restarted after a failover kept exiting on it (the soak found it)."""
        await self.redis.exists(self.key(gears.CONFIG_KEY))
        await self.redis.function_load(gears.library_source(), replace=True)
        config, groups_key, gears_key = (
            self.key(n) for n in (gears.CONFIG_KEY, gears.GROUPS_KEY, gears.GEARS_KEY)
        )
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(config, groups_key, gears_key)
        pipe.set(self.key(gears.DESCRIBE_KEY), about)
        pipe.hset(config, mapping={**settings, "gear": self.gear_id})
        pipe.hset(groups_key, mapping=dict(groups))
        pipe.sadd(gears_key, *gear_ids)
        await pipe.execute()

    def key(self, name: str) -> str:
        """One of this shard's keys (``name``: one of gears.py's)."""
        return gears.shard_key(name, self.tag)

    @follows_cluster_once
    async def call(
        self,
        function: str,
        args: list,
        keys: tuple | list = (),
        durable: bool = False,
        replicated: bool = False,
    ):
        """One gear call; a gear's refusal becomes the typed error its code names. A store that
        has no library (new, or its data lost) gets it (the region's settings come with the
        frontend's ``install``: until then client calls are refused as unconfigured).
        ``durable``: a client's change, returned once ``acks`` replicas have it (else its outcome
        is unknown); ``replicated``: a service's, the same (else the store counts as unavailable)."""
        fcall = ("FCALL", function, 1 + len(keys), self.tag, *keys, *args)
        for attempt in (1, 2):
            try:
                if not ((durable or replicated) and self.acks):
                    return await self.lean.execute(*fcall)
                # the call and its WAIT in one round trip: a remote proxy makes one per shard
                # switch of a run, and a backlog after a failover is hundreds of them
                reply, confirmed = await self.lean.execute_all(fcall, ("WAIT", self.acks, ACK_TIMEOUT_MS))
                if isinstance(reply, Exception):
                    raise reply
                if isinstance(confirmed, Exception):
                    raise confirmed
                self._confirmed(int(confirmed), client=durable)
                return reply
            except (MovedError, ClusterDownError, TryAgainError, AskError):
                raise  # followed or waited out (follows_cluster)
            except ResponseError as exc:
                if str(exc).startswith(MOVING):  # the shard is fenced while it moves: waited out
                    raise TryAgainError(str(exc)) from None
                if attempt == 1 and str(exc).startswith(NO_FUNCTION):
                    await self.redis.function_load(gears.library_source(), replace=True)
                    continue
                full = errors.store_refusal(exc, f"region {self.region} store {self.gear_id}")
                raise (full or gear_error(str(exc))) from None
        raise AssertionError("unreachable")

    def _confirmed(self, confirmed: int, client: bool) -> None:
        """A WAIT's answer: not enough replicas in time means, for a client's change, an unknown
        outcome; for a service's, a store that is unavailable."""
        if confirmed < self.acks:
            why = f"shard {self.gear_id}: no replica confirmed the change within {ACK_TIMEOUT_MS / 1000:.0f}s"
            if client:
                raise errors.OutcomeUnknown(f"{why}: the master has it, and a failover now could lose it")
            raise StoreTimeoutError(why)

    async def _replicated(self) -> None:
        """Until ``acks`` replicas have everything the shard's master had when this was called:
        what a service read from it (stream entries it ships or forwards) could otherwise be
        lost in a failover after it left (a payload or label of a write that then never was).
        WAIT covers this connection's own writes: one (a counter's INCR) marks the point."""
        mark = ("INCR", self.key(gears.REPLICATED_KEY))
        counted, confirmed = await self.lean.execute_all(mark, ("WAIT", self.acks, ACK_TIMEOUT_MS))
        for reply in (counted, confirmed):
            if isinstance(reply, Exception):
                raise reply
        self._confirmed(int(confirmed), client=False)

    async def migrate(self, client: Label, target: str) -> int:
        args = [wire.GEARS_API, *wire.label_args(client), target]
        return int(await self.call(wire.MIGRATE, args, durable=True))

    async def visible(self, client: Label, waited_s: float) -> tuple[bool, bytes]:
        """Whether the client's past is visible here (``waited_s``: how long its attach has
        waited, counted once it is); if not, the last watermark event (a raise after it is an
        event after it: see wait_watermark_event)."""
        reply = await self.call(wire.ATTACH, wire.attach_args(client, waited_s))
        return reply[0] == 1, (reply[1] if len(reply) > 1 else b"0-0")

    async def claim(self, namespace: str, key: str, holder: str, release: bool) -> tuple[bool, str]:
        args = [wire.GEARS_API, namespace, key, holder, int(release)]
        granted, current = await self.call(wire.CLAIM, args, durable=True)
        return granted == 1, current.decode()

    async def apply(self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]) -> list[int]:
        """Applies updates of one origin gear exactly once; returns the ts of those applied."""
        keys: list[str] = []
        args: list = [origin_gear, origin_gear.split("/", 1)[0], through_ts, len(updates)]
        for update in updates:
            args += [update.ts, update.src]
            rows_args(self.tag, update, keys, args)
        return [int(ts) for ts in await self.call("saturn_apply", args, keys, replicated=True)]

    async def deliver(
        self, updates: list[RemoteUpdate], marks: dict[str, int], floor: int = 0
    ) -> tuple[set[str], int]:
        """Applies updates in the given order, stamped above ``floor``, skipping those at or
        below their origin's watermark here (applied before), then raises the watermarks to
        ``marks``; returns the keys of those applied and the greatest stamp (or ``floor``)."""
        keys: list[str] = []
        args: list = [floor, len(updates)]
        for u in updates:
            args += [u.ts, u.src, u.origin_region, deps_text(u)]
            rows_args(self.tag, u, keys, args)
        args.append(len(marks))
        for origin, ts in marks.items():
            args += [origin, ts]
        stamp, *applied = await self.call("saturn_deliver", args, keys, replicated=True)
        return {key.decode() for key in applied}, int(stamp)

    async def mark_labels_outside_order(self, outside: bool) -> None:
        """Whether the labels this gear makes say that the region applied updates outside the
        tree's order (services/saturn/proxy.py, "Outside the tree's order")."""
        await self.call("saturn_outside_order", ["1" if outside else "0"])

    async def heartbeat(self) -> int:
        """A time below which this gear will never make another label (see heartbeat.lua)."""
        return int(await self.call("saturn_heartbeat", []))

    @follows_cluster
    async def stream_after(
        self, stream: str, after_ts: int, count: int, block_s: float | None = None
    ) -> list[tuple[int, dict[bytes, bytes]]]:
        """Up to ``count`` entries (ts, fields) of ``stream`` after ``after_ts``; with ``block_s``,
        waits that long for one if there is none yet."""
        start, stream = f"{after_ts}-0", self.key(stream)
        if block_s is None:
            reply = await self.lean.execute("XREAD", "COUNT", count, "STREAMS", stream, start)
        else:
            block = max(1, int(block_s * 1000))
            command = ("XREAD", "COUNT", count, "BLOCK", block, "STREAMS", stream, start)
            reply = await self.lean.execute_blocking(*command, block_s=block_s)
        if reply and self.acks:
            await self._replicated()
        return _flat_entries(reply[0][1]) if reply else []

    @follows_cluster
    async def stream_between(
        self, stream: str, after_ts: int, until_ts: int | None, count: int
    ) -> list[tuple[int, dict[bytes, bytes]]]:
        """Up to ``count`` entries of ``stream`` after ``after_ts`` and at or below ``until_ts``."""
        high = f"{until_ts}-0" if until_ts is not None else "+"
        reply = await self.lean.execute("XRANGE", self.key(stream), f"({after_ts}-0", high, "COUNT", count)
        if reply and self.acks:
            await self._replicated()
        return _flat_entries(reply)

    @follows_cluster
    async def trim_stream(self, stream: str, through_ts: int) -> None:
        """Deletes every entry at or below ``through_ts``. Exact: an approximate trim (~) deletes
        at most 10,000 entries a call."""
        await self.redis.xtrim(self.key(stream), minid=f"{through_ts + 1}-0", approximate=False)

    @follows_cluster
    async def sink_cursor(self) -> int:
        """Where the label sink had forwarded this shard's labels up to (0: never)."""
        value = await self.redis.get(self.key(gears.SINK_POSITION_KEY))
        return int(value) if value else 0

    @follows_cluster
    async def save_sink_cursor(self, ts: int) -> None:
        await self.redis.set(self.key(gears.SINK_POSITION_KEY), ts)

    @follows_cluster
    async def tree_record(self) -> dict[str, str]:
        """The region's tree record (services/saturn/epochs.py); empty where none was published."""
        raw = await self.redis.hgetall(self.key(gears.TREE_KEY))
        return {_text(key): _text(value) for key, value in raw.items()}

    @follows_cluster
    async def tree_to_send_on(self) -> int | None:
        """The epoch of the tree the label sink must send on (one small read: polled)."""
        value = await self.redis.hget(self.key(gears.TREE_KEY), gears.TREE_SEND_FIELD)
        return int(value) if value else None

    @follows_cluster
    async def wait_tree_event(self, after: bytes, timeout_s: float) -> bytes:
        """Waits up to ``timeout_s`` for a change of the tree record after event ``after`` (an
        entry id of ``gears.TREE_EVENTS``; b"0-0": any); returns the last event's id seen."""
        events = self.key(gears.TREE_EVENTS)
        command = ("XREAD", "BLOCK", max(1, int(timeout_s * 1000)), "STREAMS", events, after)
        reply = await self.lean.execute_blocking(*command, block_s=timeout_s)
        return reply[0][1][-1][0] if reply else after

    @follows_cluster
    async def note_tree_progress(self, field: str, epoch: int) -> None:
        await self.redis.hset(self.key(gears.TREE_KEY), field, epoch)

    async def heartbeat_after(
        self, stream: str, after: int, count: int
    ) -> tuple[int, list[tuple[int, dict[bytes, bytes]]]]:
        """A heartbeat, with the entries of ``stream`` (ts, fields) after ``after`` that it covers,
        in one round trip. The time returned is what those entries cover: the heartbeat, or the
        last entry's ts when there were ``count`` or more of them."""
        stable, raw = await self.call("saturn_heartbeat", [after, count], [self.key(stream)], replicated=True)
        entries = _flat_entries(raw)
        covered = entries[-1][0] if len(entries) >= count else int(stable)
        return covered, entries

    @follows_cluster
    async def watermarks(self) -> dict[str, int]:
        return _watermarks(await self.redis.hgetall(self.key(gears.WATERMARK_KEY)))

    @follows_cluster
    async def wait_watermark_event(self, after: bytes, timeout_s: float) -> None:
        """Returns when a watermark event later than ``after`` exists, or after ``timeout_s``."""
        await self.redis.xread(
            {self.key(gears.WATERMARK_EVENTS): after}, count=1, block=max(1, int(timeout_s * 1000))
        )

    @follows_cluster
    async def position(self, origin_gear: str) -> int:
        value = await self.redis.hget(self.key(gears.POSITION_KEY), origin_gear)
        return int(value) if value else 0

    async def close(self) -> None:
        await self.lean.close()
        await self.redis.aclose()


def region_shards(topology: Topology, region: str, urls: list[str] | None = None) -> list[Shard]:
    """A region's shards, in order (``urls``: their Redis servers where not the topology's)."""
    gear_ids = topology.gear_ids(region)
    urls = urls or [topology.redis_url(region, k) for k in range(len(gear_ids))]
    nodes = topology.store_urls(region) if topology.store.engine == "cluster" else []
    return [
        Shard(url, gear_id, region, topology.shard_tag(region, k), topology.store.acks, nodes)
        for k, (url, gear_id) in enumerate(zip(urls, gear_ids, strict=True))
    ]


class RegionStore:
    """All shards of one region, routing each row to its shard."""

    def __init__(self, topology: Topology, region: str, urls: list[str] | None = None):
        """``urls``: the shards' Redis servers, where not the topology's (a test's)."""
        self.topology = topology
        self.region = region
        self.vectors = topology.traits.vectors  # the labels it returns carry vectors
        self.shards = region_shards(topology, region, urls)

    def shard_for(self, group: str, row: str) -> Shard:
        return self.shards[self.topology.shard_of(self.region, group, row)]

    async def install(self) -> None:
        """Loads the gears and this region's settings into every shard (at every start: a store
        always runs the library of the services that use it)."""
        t = self.topology
        settings: dict[FieldT, EncodableT] = {
            "region": self.region, "shards": len(self.shards), "protocol": t.protocol,
            "max_value": t.max_value_bytes,
            # what the gears do differently by protocol: its traits, never its name
            "emits": int(t.traits.emits_labels), "vectors": int(t.traits.vectors), "attach": t.traits.attach,
            "migration_label": int(t.traits.migration_label),
            "labels_in_bulk": int(gears.labels_stream(t.traits) == gears.BULK_STREAM),
            "regions": " ".join(t.region_names),
            # the regions that ship something here (share a group with it): Cure's attach waits
            # for no other region, which can have nothing it must show
            "senders": " ".join(r for r in t.region_names if r != self.region
                                and t.groups_at(r) & t.groups_at(self.region)),
        }  # fmt: skip
        about = json.dumps(t.describe())
        groups: dict[FieldT, EncodableT] = {g: " ".join(members) for g, members in t.group_members.items()}
        gear_ids = [g for r in t.region_names for g in t.gear_ids(r)]
        await asyncio.gather(
            *(s.install({**settings, "shard": k}, groups, gear_ids, about) for k, s in enumerate(self.shards))
        )

    async def write(self, client: Label, mutations: list[Mutation], atomic: bool = True) -> Label:
        """Writes a batch (all or none visible unless not ``atomic``): causal_client/transactions.py's
        plan, run here; returns the greatest label made."""
        gear_ids = [s.gear_id for s in self.shards]
        plan = transactions.write_plan(client, mutations, len(self.shards), gear_ids, atomic, self.vectors)
        return await self.run_plan(plan)

    async def run_plan(self, plan: transactions.Plan):
        """Runs a transaction's plan, each round's calls at once (asyncio)."""

        async def one(c: transactions.ShardCall):
            try:
                return await self.shards[c.shard].call(c.function, c.args, durable=not c.read_only)
            except errors.CausalError as exc:
                return exc

        try:
            round_ = next(plan)
            while True:
                round_ = plan.send(list(await asyncio.gather(*(one(c) for c in round_))))
        except StopIteration as done:
            return done.value

    async def migrate(self, client: Label, target_region: str) -> Label:
        shard = self.shards[0]
        ts = await shard.migrate(client, target_region)
        return Label(ts=ts, src=shard.gear_id, type=LabelType.MIGRATION, target=target_region)

    async def read(self, client: Label, ops: list[ReadSpec], floor: int = 0) -> transactions.ReadResult:
        """A read-only transaction (causal_client/transactions.py): one snapshot at or after ``floor``."""
        return await self.run_plan(transactions.read_plan(client, ops, len(self.shards), floor, self.vectors))

    async def wait_visible(self, label: Label, timeout: float | None = None) -> None:
        """Paper Alg. 1's wait: the gears decide whether the label's past is visible here (by
        the protocol: attach.lua); while not, block on the watermark events, never poll.
        Raises TimeoutError after ``timeout`` seconds."""
        started = time.monotonic()
        shard = self.shards[0]
        while True:
            visible, last_event = await shard.visible(label, time.monotonic() - started)
            if visible:
                return
            left = wire.ATTACH_SLICE_S
            if timeout is not None:
                left = min(left, started + timeout - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"label {label} not stable at {self.region} within {timeout:.1f}s")
            await shard.wait_watermark_event(last_event, left)  # the proxy raised them, or time

    def shards_of(self, update: RemoteUpdate) -> list[int]:
        """The local shards holding the update's rows, in order."""
        return sorted({self.topology.shard_of(self.region, r.group, r.row) for r in update.rows})

    async def apply_across_shards(self, update: RemoteUpdate, floor: int = 0) -> int:
        """Applies an update whose rows span shards all at once (a remote atomic batch): staged on
        each shard, decided at the first, settled at the others (txn.lua), so that a reader never
        sees part of it, at a stamp above ``floor`` (returned). Idempotent (a cell is
        last-writer-wins, a counter's partial sum a state), so applying it again after a crash is
        harmless; a crash midway leaves staged parts that the region's sweeper settles."""
        parts: dict[int, list[RowChange]] = {}
        for row in update.rows:
            parts.setdefault(self.topology.shard_of(self.region, row.group, row.row), []).append(row)
        coordinator = min(parts)
        for _ in range(3):
            txid = f"{update.src}|{update.ts}|{uuid.uuid4().hex[:12]}"
            head = [
                txid,
                self.shards[coordinator].gear_id,
                floor,
                update.ts,
                update.src,
                update.origin_region,
            ]
            proposals = await asyncio.gather(
                *(
                    self.shards[k].call("saturn_stage_remote", [*head, *staged_rows(update, rows)])
                    for k, rows in parts.items()
                )
            )
            try:
                stamp = await self.shards[coordinator].call(
                    "saturn_decide", [txid, max(map(int, proposals))], replicated=True
                )
            except errors.TransactionAborted:
                continue  # the sweeper gave up on it (this took long): its parts are dropped
            await asyncio.gather(
                *(
                    self.shards[k].call("saturn_settle", [txid, "c", stamp], replicated=True)
                    for k in parts
                    if k != coordinator
                )
            )
            return int(stamp)
        raise errors.TransactionAborted(f"update {update.key} was aborted three times while applied here")

    async def apply_remote(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]
    ) -> list[RemoteUpdate]:
        """Applies one origin gear's updates in their order; each local shard records how far it
        got atomically with its part, so a re-sent batch is skipped shard by shard (an update
        spanning shards is applied across them, between the runs before and after it: applying
        it again after a crash is harmless). Returns those applied."""
        applied: list[RemoteUpdate] = []
        run: list[RemoteUpdate] = []
        for update in updates:
            if len(self.shards_of(update)) == 1:
                run.append(update)
                continue
            if run:
                applied += await self._per_shard(Shard.apply, origin_gear, run[-1].ts, run)
                run = []
            await self.apply_across_shards(update)
            applied.append(update)
        return applied + await self._per_shard(Shard.apply, origin_gear, through_ts, run)

    async def _per_shard(self, method, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]):
        """Runs ``method`` on every shard with its part of ``updates`` (every shard, even with
        none: each keeps its own position); returns the updates whose ts it reported done."""
        parts: list[list[RemoteUpdate]] = [[] for _ in self.shards]
        for update in updates:
            parts[self.shards_of(update)[0]].append(update)
        done_per_shard = await asyncio.gather(
            *(
                method(shard, origin_gear, through_ts, part)
                for shard, part in zip(self.shards, parts, strict=True)
            )
        )
        done = {ts for shard_done in done_per_shard for ts in shard_done}
        return [u for u in updates if u.ts in done]

    # -- claims (strongly consistent, decided by the key's owner region; see causal_client/claims.py)
    async def claim(self, namespace: str, key: str, holder: str, release: bool = False) -> tuple[bool, str]:
        """Sets the key's holder unless it has one, or frees it if ``holder`` holds it: whether
        that happened, and the holder after it ("" when free)."""
        return await self.shards[0].claim(namespace, key, holder, release)

    async def position(self, origin_gear: str) -> int:
        """Everything of ``origin_gear`` up to this ts is applied at every local shard."""
        return min(await asyncio.gather(*(s.position(origin_gear) for s in self.shards)))

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.shards))
