"""Bulk-data transfer, sending side: ships each local gear's outgoing stream to the regions that
replicate the rows' groups (and to no other region: genuine partial replication).

One stream per (local gear, destination). On (re)connect the receiver says how far it is; the
sender reads the gear's Redis stream from there. Acknowledged entries are trimmed from the stream
once every destination has them, so a crash of the sender loses nothing either.
"""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
from redis.exceptions import RedisError

from causal_client.wan import DelayLine
from services import auth, metrics, runtime
from services.bulk.tail import GearTail
from services.proto import bulk_pb2, bulk_pb2_grpc
from services.protocols import protocol_class
from services.region import gears
from services.region.store import Shard
from services.topology import Topology

log = logging.getLogger("bulk-sender")

WINDOW = 64  # batches with payloads in flight per destination (empty ones are not acknowledged)
# A destination that has nothing new of its own still hears how far the gear's time got: every
# heartbeat period (the protocol's, ``Protocol.bulk_heartbeat_s``) while its receiver orders
# updates by timestamp (Saturn's fallback, §6.1, GentleRain, Cure) and so asks for heartbeats,
# else every PROGRESS_S (its acknowledgements let the stream be trimmed).
PROGRESS_S = 1.0


class GearShipper:
    """Ships one local gear's stream to one destination region, resuming after crashes."""

    def __init__(
        self, topology: Topology, region: str, shard: int, destination: str, trimmer: Trimmer, tail: GearTail
    ):
        self.topology = topology
        self.region = region
        self.gear = topology.gear_ids(region)[shard]
        self.destination = destination
        self.groups = {g.encode() for g in topology.groups_at(region) & topology.groups_at(destination)}
        self.tail = tail
        self.trimmer = trimmer
        self.sent = metrics.BULK_SENT.labels(region, destination)
        self.heartbeats_sent = metrics.BULK_HEARTBEATS.labels(region, destination)
        self.link = topology.wan_link(region, destination)
        self.site = topology.region(region).site
        self.heartbeats = False  # the receiver wants them (it says so on the ack stream)

    def wants(self, groups: bytes) -> bool:
        """Whether an entry of ``groups`` (an atomic batch's are several, space-separated) has
        rows that the destination replicates."""
        return groups in self.groups or (b" " in groups and not self.groups.isdisjoint(groups.split()))

    async def run(self, stop: asyncio.Event) -> None:
        backoff = runtime.Backoff(self.topology.saturn.bulk_retry_s)
        while not stop.is_set():
            try:
                await self._session(stop)
                backoff.reset()
            except (grpc.aio.AioRpcError, RedisError, ConnectionError, OSError) as exc:
                delay = backoff.next_delay()
                log.warning("%s → %s: %s; retrying in %.1fs", self.gear, self.destination, _why(exc), delay)
                await runtime.sleep_or_stop(stop, delay)

    async def _session(self, stop: asyncio.Event) -> None:
        async with grpc.aio.insecure_channel(
            self.topology.relays.route(self.site, self.topology.bulk_endpoint(self.destination), "ship"),
            options=runtime.GRPC_OPTIONS,
        ) as channel:
            outbox: DelayLine[bulk_pb2.ShipMessage | None] = DelayLine(self.link)
            outbox.put(
                bulk_pb2.ShipMessage(hello=bulk_pb2.Hello(origin_gear=self.gear, origin_region=self.region))
            )

            async def requests():
                while (message := await outbox.get()) is not None:
                    yield message

            call = bulk_pb2_grpc.BulkReceiverStub(channel).Ship(requests(), metadata=auth.call_metadata())
            replies = call.__aiter__()
            start = await anext(replies)  # the receiver's durable position
            log.info(
                "%s → %s: connected, resuming after ts %d", self.gear, self.destination, start.through_ts
            )
            self.trimmer.acked(self.gear, self.destination, start.through_ts)
            self.heartbeats = start.heartbeats
            in_flight = asyncio.Semaphore(WINDOW)
            reader = asyncio.create_task(self._read_stream(start.through_ts, outbox, in_flight, stop))
            # A reader that fails (the gear's Redis went away) ends the session, which starts over
            # from the receiver's position: without this, the loop below waits for acks forever.
            reader.add_done_callback(lambda task: _failed(task) and call.cancel())
            try:
                async for ack in replies:
                    if ack.heartbeats != self.heartbeats:
                        log.info("%s → %s: heartbeats %s", self.gear, self.destination,
                                 "wanted" if ack.heartbeats else "no longer wanted")  # fmt: skip
                        self.heartbeats = ack.heartbeats
                    if not ack.notice:  # of a batch with payloads: one fewer in flight
                        in_flight.release()
                    if ack.through_ts:  # a notice may carry a position too (after empty batches)
                        self.trimmer.acked(self.gear, self.destination, ack.through_ts)
            except asyncio.CancelledError:
                if not _failed(reader):
                    raise  # a real cancellation (the process stops)
                # else: the reader failed and cancelled the call; its error is raised below
            finally:
                reader.cancel()
                call.cancel()
                self.tail.leave(self)
            if _failed(reader):
                raise reader.exception()  # type: ignore[misc]

    async def _read_stream(
        self, after_ts: int, outbox: DelayLine, in_flight: asyncio.Semaphore, stop: asyncio.Event
    ) -> None:
        """Ships this destination's entries as the gear's tail brings them (from Redis while
        behind it). A batch's through_ts promises that this gear will write nothing at or below
        it (the receiver's stable time in timestamp order needs it, paper §6.1); a batch without
        payloads is a heartbeat, sent only when the destination would otherwise not hear of the
        gear's progress for a heartbeat period (or PROGRESS_S, when it wants no heartbeats)."""
        cursor, last_sent, sent_through = after_ts, time.monotonic(), after_ts
        while not stop.is_set():
            quiet_s = self.tail.heartbeat_s if self.heartbeats else PROGRESS_S
            # With progress not sent yet: until it is due; else: for news, a quiet period at most.
            wait_s = max(0.0, last_sent + quiet_s - time.monotonic()) if cursor > sent_through else quiet_s
            found = await self.tail.after(self, cursor, wait_s)
            entries, through = found if found is not None else await self.tail.catch_up(cursor)
            mine = [(ts, payload) for ts, group, payload in entries if self.wants(group)]
            due = through > sent_through and time.monotonic() - last_sent >= quiet_s
            cursor = through
            if not mine and not due:
                continue  # woken by another destination's entries: nothing to build or send
            batch = bulk_pb2.PayloadBatch(through_ts=through)
            for ts, payload in mine:
                batch.payloads.add(ts=ts, body=payload)
            if batch.payloads:
                await in_flight.acquire()  # flow control counts batches with payloads only
            elif self.heartbeats:
                self.heartbeats_sent.inc()
            batch.sent_at = time.time()
            outbox.put(bulk_pb2.ShipMessage(batch=batch))
            self.sent.inc(len(batch.payloads))
            last_sent, sent_through = time.monotonic(), through
        outbox.put(None)


class Trimmer:
    """Trims each gear's stream below what every destination has acknowledged."""

    def __init__(self, topology: Topology, region: str, destinations: list[str]):
        self.destinations = set(destinations)
        self.positions: dict[str, dict[str, int]] = {g: {} for g in topology.gear_ids(region)}
        gear_ids = topology.gear_ids(region)
        self.shards = {g: Shard(topology.redis_url(region, k), g, region) for k, g in enumerate(gear_ids)}

    def acked(self, gear: str, destination: str, ts: int) -> None:
        known = self.positions[gear]
        known[destination] = max(ts, known.get(destination, 0))

    async def run(self, stop: asyncio.Event, period_s: float = 1.0) -> None:
        trimmed: dict[str, int] = {}
        while not stop.is_set():
            await runtime.sleep_or_stop(stop, period_s)
            for gear, known in self.positions.items():
                if set(known) != self.destinations:
                    continue  # a destination has not told us its position yet
                floor = min(known.values())
                if floor > trimmed.get(gear, 0):
                    try:
                        await self.shards[gear].trim_stream(gears.BULK_STREAM, floor)
                        trimmed[gear] = floor
                    except (RedisError, OSError) as exc:
                        log.warning("trim %s: %s", gear, exc)


def _failed(task: asyncio.Task) -> bool:
    return task.done() and not task.cancelled() and task.exception() is not None


def _why(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name} {exc.details()}"
    return str(exc) or type(exc).__name__


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    local = topology.groups_at(region)
    destinations = [r for r in topology.region_names if r != region and local & topology.groups_at(r)]
    trimmer = Trimmer(topology, region, destinations)
    heartbeat_s = protocol_class(topology.protocol).bulk_heartbeat_s(topology)
    tails, shippers = [], []
    for shard, gear in enumerate(topology.gear_ids(region)):
        tail = GearTail(Shard(topology.redis_url(region, shard), gear, region), heartbeat_s)
        mine = [GearShipper(topology, region, shard, dest, trimmer, tail) for dest in destinations]
        tail.heartbeats_wanted = lambda mine=mine: any(s.heartbeats for s in mine)
        tails.append(tail)
        shippers += mine
    log.info("bulk sender %s → %s", region, ", ".join(destinations) or "(nobody)")
    await asyncio.gather(trimmer.run(stop), *(t.run(stop) for t in tails), *(s.run(stop) for s in shippers))


def main() -> None:
    runtime.service_main("bulk-sender: ships this region's payloads to replica regions", serve)


if __name__ == "__main__":
    main()
