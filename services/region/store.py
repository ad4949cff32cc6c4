"""A region's view of its shards: reads, gear writes, migrations and remote applies over Redis."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import msgpack
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError, ResponseError

from causal_client.label import Label, LabelType
from causal_client.proto import store_pb2
from services.region import gears
from services.region.validation import MAX_ROW_COLUMNS, MAX_SLICE
from services.topology import Topology


class BadRequestForData(ValueError):
    """A request that is well-formed but that the data refuses: the client's mistake (an
    INVALID_ARGUMENT status), found inside a gear."""


class ColumnTypeError(BadRequestForData):
    """A set on a counter column or an increment on a value column."""


class RowTooWide(BadRequestForData):
    """A whole-row read of a row with more columns than a reply may carry."""

    def __init__(self, group: str, row: str):
        super().__init__(
            f"row {row!r} of group {group!r} has more than {MAX_ROW_COLUMNS} columns: read it in "
            f"slices (at most {MAX_SLICE} columns a page, with a cursor)"
        )


@dataclass(frozen=True, slots=True)
class RemoteUpdate:
    """One payload as the origin gear packed it (see write.lua)."""

    ts: int
    src: str
    origin_time_us: int
    group: str
    row: str
    changes: tuple[gears.ColumnChange, ...]

    @property
    def origin_region(self) -> str:
        return self.src.split("/", 1)[0]

    @property
    def key(self) -> str:
        """What names it in the remote proxy until its label comes: its label's "src|ts"."""
        return f"{self.src}|{self.ts}"

    @staticmethod
    def unpack(body: bytes) -> RemoteUpdate:
        ts, src, origin_time, group, row, ops = msgpack.unpackb(body, raw=True)
        changes = tuple(gears.ColumnChange(k.decode(), c.decode(), a) for k, c, a in ops)
        return RemoteUpdate(ts, src.decode(), origin_time, group.decode(), row.decode(), changes)


def _watermarks(raw: dict[bytes, bytes]) -> dict[str, int]:
    """The watermark hash as Redis returns it -> origin region: ts."""
    return {k.decode(): int(v) for k, v in raw.items()}


class Shard:
    """One shard: a Redis server and the gear that owns it."""

    def __init__(self, url: str, gear_id: str, region: str):
        self.gear_id = gear_id
        self.region = region
        self.redis = aioredis.Redis.from_url(url, socket_timeout=30, max_connections=256)
        self._write = self.redis.register_script(gears.script_source("write"))
        self._read = self.redis.register_script(gears.script_source("read"))
        self._migrate = self.redis.register_script(gears.script_source("migrate"))
        self._apply = self.redis.register_script(gears.script_source("apply"))
        self._deliver = self.redis.register_script(gears.script_source("deliver"))
        self._heartbeat = self.redis.register_script(gears.script_source("heartbeat"))

    async def write(self, client_ts: int, rows: list[gears.RowChange], emit_label: bool) -> int:
        keys, args = gears.write_args(client_ts, self.gear_id, self.region, emit_label, rows)
        try:
            return int(await self._write(keys=keys, args=args))
        except ResponseError as exc:
            if str(exc).startswith("TYPE "):
                raise ColumnTypeError(str(exc)[5:]) from None
            raise

    async def migrate(self, client_ts: int, target: str, emit_label: bool) -> int:
        args = [client_ts, self.gear_id, target, int(emit_label), gears.SINK_WAKE_CHANNEL]
        return int(await self._migrate(keys=[gears.GEAR_KEY, gears.LABEL_STREAM], args=args))

    async def read(self, ops: list[store_pb2.ReadOp], default_limit: int) -> list:
        """One round trip for any number of reads (a pipeline of EVALSHA)."""
        calls = []
        for op in ops:
            after = op.slice.after if op.HasField("slice") else None
            limit = (op.slice.limit or default_limit) if op.HasField("slice") else MAX_ROW_COLUMNS
            args = gears.read_args(list(op.columns), after, limit, op.slice.reverse)
            calls.append((gears.row_keys(op.group, op.row), args))
        if len(calls) == 1:
            try:
                raw = await self._read(keys=calls[0][0], args=calls[0][1])
            except ResponseError as exc:
                raw = exc
            return [_read_result(ops[0], raw)]
        # Not Script-in-pipeline: redis-py would add a SCRIPT EXISTS round trip to every execute.
        for attempt in (1, 2):
            pipe = self.redis.pipeline(transaction=False)
            for keys, args in calls:
                pipe.evalsha(self._read.sha, len(keys), *keys, *args)
            try:
                results = await pipe.execute(raise_on_error=False)
            except NoScriptError:
                results = [NoScriptError()]
            if attempt == 1 and any(isinstance(r, NoScriptError) for r in results):
                await self.redis.script_load(self._read.script)  # e.g. Redis was restarted
                continue
            return [_read_result(op, raw) for op, raw in zip(ops, results, strict=True)]
        raise AssertionError("unreachable")

    async def apply(self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]) -> list[int]:
        """Applies updates of one origin gear exactly once; returns the ts of those applied."""
        keys: list[str] = [gears.POSITION_KEY]
        args: list = [origin_gear, origin_gear.split("/", 1)[0], through_ts, len(updates)]
        for update in updates:
            keys += gears.row_keys(update.group, update.row)
            args += [update.ts, update.src, len(update.changes), *gears.change_args(update.changes)]
        return [int(ts) for ts in await self._apply(keys=keys, args=args)]

    async def deliver(self, updates: list[RemoteUpdate], marks: dict[str, int]) -> set[str]:
        """Applies updates in the given order, skipping those at or below their origin's
        watermark here (applied before), then raises the watermarks to ``marks``; returns the
        keys of those applied."""
        keys: list[str] = [gears.WATERMARK_KEY, gears.WATERMARK_EVENTS]
        args: list = [gears.WATERMARK_EVENTS_MAXLEN, len(updates)]
        for u in updates:
            keys += gears.row_keys(u.group, u.row)
            args += [u.ts, u.src, u.origin_region, len(u.changes), *gears.change_args(u.changes)]
        args.append(len(marks))
        for origin, ts in marks.items():
            args += [origin, ts]
        return {key.decode() for key in await self._deliver(keys=keys, args=args)}

    async def heartbeat(self) -> int:
        """A time below which this gear will never make another label (see heartbeat.lua)."""
        return int(await self._heartbeat(keys=[gears.GEAR_KEY]))

    async def heartbeat_after(
        self, stream: str, after: int, count: int
    ) -> tuple[int, list[tuple[int, dict[bytes, bytes]]]]:
        """A heartbeat, with the entries of ``stream`` (ts, fields) after ``after`` that it covers,
        in one round trip. The time returned is what those entries cover: the heartbeat, or the
        last entry's ts when there were ``count`` or more of them."""
        stable, raw = await self._heartbeat(keys=[gears.GEAR_KEY, stream], args=[after, count])
        entries = [
            (int(entry_id.split(b"-", 1)[0]), dict(zip(fields[::2], fields[1::2], strict=True)))
            for entry_id, fields in raw
        ]
        covered = entries[-1][0] if len(entries) >= count else int(stable)
        return covered, entries

    async def watermarks(self) -> dict[str, int]:
        return _watermarks(await self.redis.hgetall(gears.WATERMARK_KEY))

    async def watermarks_since(self) -> tuple[dict[str, int], bytes]:
        """The watermarks, and the last watermark event before reading them (one round trip):
        a raise after that event is an event after it (see wait_watermark_event)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.xrevrange(gears.WATERMARK_EVENTS, count=1)
        pipe.hgetall(gears.WATERMARK_KEY)
        last, marks = await pipe.execute()
        return _watermarks(marks), (last[0][0] if last else b"0-0")

    async def wait_watermark_event(self, after: bytes, timeout_s: float) -> None:
        """Returns when a watermark event later than ``after`` exists, or after ``timeout_s``."""
        await self.redis.xread({gears.WATERMARK_EVENTS: after}, count=1, block=max(1, int(timeout_s * 1000)))

    async def position(self, origin_gear: str) -> int:
        value = await self.redis.hget(gears.POSITION_KEY, origin_gear)
        return int(value) if value else 0

    async def close(self) -> None:
        await self.redis.aclose()


class RegionStore:
    """All shards of one region, routing each row to its shard."""

    def __init__(self, topology: Topology, region: str):
        self.topology = topology
        self.region = region
        self.shards = [
            Shard(topology.redis_url(region, k), gear_id, region)
            for k, gear_id in enumerate(topology.gear_ids(region))
        ]

    def shard_for(self, group: str, row: str) -> Shard:
        return self.shards[self.topology.shard_of(self.region, group, row)]

    async def write(self, client: Label, rows: list[gears.RowChange], emit_label: bool) -> Label:
        by_shard: dict[int, list[gears.RowChange]] = {}
        for row in rows:
            by_shard.setdefault(self.topology.shard_of(self.region, row.group, row.row), []).append(row)
        results = await asyncio.gather(
            *(self.shards[k].write(client.ts, part, emit_label) for k, part in by_shard.items())
        )
        best = Label.zero()
        for k, ts in zip(by_shard, results, strict=True):
            best = best.merge(Label(ts=ts, src=self.shards[k].gear_id, target=_target(by_shard[k][-1])))
        return best

    async def migrate(self, client: Label, target_region: str, emit_label: bool) -> Label:
        shard = self.shards[0]
        ts = await shard.migrate(client.ts, target_region, emit_label)
        return Label(ts=ts, src=shard.gear_id, type=LabelType.MIGRATION, target=target_region)

    async def read(
        self, ops: list[store_pb2.ReadOp], default_limit: int
    ) -> tuple[list[store_pb2.RowResult], Label]:
        by_shard: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            by_shard.setdefault(self.topology.shard_of(self.region, op.group, op.row), []).append(i)
        replies = await asyncio.gather(
            *(self.shards[k].read([ops[i] for i in idx], default_limit) for k, idx in by_shard.items())
        )
        results: list[store_pb2.RowResult | None] = [None] * len(ops)
        best = Label.zero()
        for idx, reply in zip(by_shard.values(), replies, strict=True):
            for i, raw in zip(idx, reply, strict=True):
                results[i], label = _row_result(ops[i], raw)
                best = best.merge(label)
        return results, best  # type: ignore[return-value]

    async def apply_remote(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]
    ) -> list[RemoteUpdate]:
        """Applies one origin gear's updates; each local shard records ``through_ts`` atomically
        with its part, so a re-sent batch is skipped shard by shard. Returns those applied."""
        return await self._per_shard(Shard.apply, origin_gear, through_ts, updates)

    async def _per_shard(self, method, origin_gear: str, through_ts: int, updates: list[RemoteUpdate]):
        """Runs ``method`` on every shard with its part of ``updates`` (every shard, even with
        none: each keeps its own position); returns the updates whose ts it reported done."""
        parts: list[list[RemoteUpdate]] = [[] for _ in self.shards]
        for update in updates:
            parts[self.topology.shard_of(self.region, update.group, update.row)].append(update)
        done_per_shard = await asyncio.gather(
            *(
                method(shard, origin_gear, through_ts, part)
                for shard, part in zip(self.shards, parts, strict=True)
            )
        )
        done = {ts for shard_done in done_per_shard for ts in shard_done}
        return [u for u in updates if u.ts in done]

    # -- claims (strongly consistent, decided by the key's owner region; see causal_client/claims)
    @staticmethod
    def _claim_key(namespace: str, key: str) -> str:
        return f"{gears.CLAIM_PREFIX}{namespace}\x00{key}"

    async def claim(self, namespace: str, key: str, holder: str) -> str:
        """Sets the key's holder unless it has one; returns the holder either way."""
        redis = self.shards[0].redis
        name = self._claim_key(namespace, key)
        if await redis.set(name, holder, nx=True):
            return holder
        current = await redis.get(name)
        return current.decode() if current is not None else await self.claim(namespace, key, holder)

    async def claim_holder(self, namespace: str, key: str) -> str | None:
        current = await self.shards[0].redis.get(self._claim_key(namespace, key))
        return current.decode() if current is not None else None

    async def release_claim(self, namespace: str, key: str, holder: str) -> bool:
        """Frees the key if ``holder`` holds it (compare-and-delete, atomically)."""
        released = await self.shards[0].redis.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
            1, self._claim_key(namespace, key), holder,
        )  # fmt: skip
        return bool(released)

    async def position(self, origin_gear: str) -> int:
        """Everything of ``origin_gear`` up to this ts is applied at every local shard."""
        return min(await asyncio.gather(*(s.position(origin_gear) for s in self.shards)))

    async def close(self) -> None:
        await asyncio.gather(*(s.close() for s in self.shards))


def _target(row: gears.RowChange) -> str:
    return f"{row.group}/{row.row}"


def _row_result(op: store_pb2.ReadOp, raw: list) -> tuple[store_pb2.RowResult, Label]:
    """Parses what read.lua returned into cells; returns the row and its greatest label."""
    columns, cells, counter_flat, next_cursor = raw
    counters: dict[str, int] = {}
    for field, value in zip(counter_flat[::2], counter_flat[1::2], strict=True):
        column = field.split(b"|", 1)[1].decode()
        counters[column] = counters.get(column, 0) + int(value.rsplit(b"|", 1)[1])
    result = store_pb2.RowResult(group=op.group, row=op.row, next_cursor=_text(next_cursor))
    best = Label.zero()
    for column, cell in zip(columns, cells, strict=True):
        if cell is None:
            continue
        ts, src, flag, value = cell.split(b"|", 3)
        label = Label(ts=int(ts), src=src.decode(), target=f"{op.group}/{op.row}")
        best = best.merge(label)
        if flag == b"t":
            continue
        name = column.decode() if isinstance(column, bytes) else column
        pb_label = store_pb2.Label(ts=label.ts, src=label.src, target=label.target)
        if flag == b"c":
            result.cells.add(column=name, label=pb_label, is_counter=True, counter=counters.get(name, 0))
        else:
            result.cells.add(column=name, value=value, label=pb_label)
    return result, best


def _read_result(op: store_pb2.ReadOp, raw: list | Exception) -> list:
    """What read.lua returned for ``op``, or the error it stands for."""
    if isinstance(raw, ResponseError) and str(raw).startswith("WIDE "):
        raise RowTooWide(op.group, op.row)
    if isinstance(raw, Exception):
        raise raw
    return raw


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
