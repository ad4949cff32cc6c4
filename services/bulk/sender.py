"""Bulk-data transfer, sending side: ships each local gear's outgoing stream to the regions that
replicate the rows' groups (and to no other region: genuine partial replication).

One link-transport connection per (local gear, destination), to the destination's ``bulk``
service. On (re)connect the receiver says how far it is; the sender reads the gear's Redis stream
from there. Acknowledged entries are trimmed from the stream
once every destination has them, so a crash of the sender loses nothing either.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

from google.protobuf.message import DecodeError
from redis.exceptions import RedisError

from services import metrics, runtime
from services.bulk.receiver import BULK
from services.bulk.tail import GearTail, TailLabels
from services.proto import bulk_pb2
from services.protocols import protocol_class
from services.region import gears
from services.region.store import region_shards
from services.saturn.label_sink import LabelSink
from services.topology import Topology
from services.transport.client import open_link
from services.transport.connection import Connection
from services.transport.delayed import DelayedWrites
from services.transport.errors import LinkClosed, LinkError
from services.wan import AT_ONCE

log = logging.getLogger("bulk-sender")

# Batches with payloads in flight per destination (empty ones are not acknowledged): a shipper
# whose window is full holds no label back (tail.stall), so it must rarely be full but on a slow
# or cut link; 64 filled at ~300 small batches a second on a 100 ms link.
WINDOW = 512
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
        self.site = topology.region(region).site
        self.heartbeats = False  # the receiver wants them (it says so on the ack stream)
        self.connected_at: float | None = None  # when the current session reached its receiver

    def wants(self, groups: bytes) -> bool:
        """Whether an entry of ``groups`` (an atomic batch's are several, space-separated) has
        rows that the destination replicates."""
        return groups in self.groups or (b" " in groups and not self.groups.isdisjoint(groups.split()))

    async def run(self, stop: asyncio.Event) -> None:
        delays = self.topology.saturn.bulk_retry_s
        backoff = runtime.Backoff(delays)
        while not stop.is_set():
            self.connected_at = None
            try:
                await self._session(stop)
                backoff.reset()
            except (LinkError, RedisError, ConnectionError, OSError) as exc:
                # A session that worked a while is retried fast again (one ends only by an error,
                # so a reset after it never came and every reconnection waited the longest
                # delay); one that died at once (a receiver that closes after the handshake)
                # keeps backing off.
                if self.connected_at is not None and time.monotonic() - self.connected_at >= max(delays):
                    backoff.reset()
                delay = backoff.next_delay()
                log.warning("%s → %s: %s; retrying in %.1fs", self.gear, self.destination, _why(exc), delay)
                await runtime.sleep_or_stop(stop, delay)

    async def _session(self, stop: asyncio.Event) -> None:
        """One connection: the receiver's position first (its accept), then the gear's entries
        after it, until the connection ends (raising LinkClosed), the reader fails (its Redis
        went away) or the process stops. The reader puts batches in the outbox, which writes each
        once its latency has passed (DelayedWrites); acknowledgements are taken as they are read."""
        endpoint = self.topology.relays.route(
            self.site, self.topology.bulk_endpoint(self.destination), "ship"
        )
        hello = bulk_pb2.Hello(origin_gear=self.gear, origin_region=self.region)
        connection, answer = await open_link(
            endpoint, BULK, hello.SerializeToString(), server_name=self.destination
        )
        try:
            start = bulk_pb2.Position.FromString(answer)
            self.connected_at = time.monotonic()
            log.info(
                "%s → %s: connected, resuming after ts %d", self.gear, self.destination, start.through_ts
            )
            self.trimmer.acked(self.gear, self.destination, start.through_ts)
            self.heartbeats = start.heartbeats
            in_flight = asyncio.Semaphore(WINDOW)
            # Written at once: the receiver serves the link's latency (receiver.py says why).
            outbox: DelayedWrites[bulk_pb2.PayloadBatch] = DelayedWrites(AT_ONCE, _encode_batches)
            outbox.attach(connection)
            connection.deliver_to(lambda messages: self._take_acks(messages, in_flight, connection))
            reader = asyncio.ensure_future(self._read_stream(start.through_ts, outbox, in_flight, stop))
            ends: list[asyncio.Future[None] | asyncio.Future[str]] = [reader, connection.closed]
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                reader.result()  # a reader that failed raises here
            else:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            if not connection.is_open and not stop.is_set():
                raise LinkClosed(connection.closed.result())
        finally:
            self.tail.leave(self)
            connection.end()

    def _take_acks(self, messages: list[bytes], in_flight: asyncio.Semaphore, connection: Connection) -> None:
        """The receiver's acknowledgements, as they are read."""
        for body in messages:
            try:
                ack = bulk_pb2.Position.FromString(body)
            except DecodeError:
                connection.abort(f"{self.destination} sent a message that is not a Position")
                return
            if ack.heartbeats != self.heartbeats:
                log.info("%s → %s: heartbeats %s", self.gear, self.destination,
                         "wanted" if ack.heartbeats else "no longer wanted")  # fmt: skip
                self.heartbeats = ack.heartbeats
            if not ack.notice:  # of a batch with payloads: one fewer in flight
                in_flight.release()
            if ack.through_ts:  # a notice may carry a position too (after empty batches)
                self.trimmer.acked(self.gear, self.destination, ack.through_ts)

    async def _read_stream(
        self,
        after_ts: int,
        outbox: DelayedWrites[bulk_pb2.PayloadBatch],
        in_flight: asyncio.Semaphore,
        stop: asyncio.Event,
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
            mine = [(ts, payload) for ts, group, payload, _ in entries if self.wants(group)]
            due = through > sent_through and time.monotonic() - last_sent >= quiet_s
            cursor = through
            if not mine and not due:
                continue  # woken by another destination's entries: nothing to build or send
            batch = bulk_pb2.PayloadBatch(through_ts=through)
            for ts, payload in mine:
                batch.payloads.add(ts=ts, body=payload)
            if batch.payloads:  # flow control counts batches with payloads only
                if in_flight.locked():  # a full window: the link is slow or cut (tail.stall)
                    await self.tail.stall(self, True)
                    try:
                        await in_flight.acquire()
                    finally:
                        await self.tail.stall(self, False)
                else:
                    await in_flight.acquire()
            elif self.heartbeats:
                self.heartbeats_sent.inc()
            batch.sent_at = time.time()
            outbox.put(batch)
            self.sent.inc(len(batch.payloads))
            last_sent, sent_through = time.monotonic(), through


class Trimmer:
    """Trims each gear's stream below what every destination has acknowledged, and, where the
    label sink reads the bulk stream (``gears.labels_stream``), below the sink's saved cursor:
    a restarted sink resends from there."""

    def __init__(self, topology: Topology, region: str, destinations: list[str]):
        self.destinations = set(destinations)
        self.positions: dict[str, dict[str, int]] = {g: {} for g in topology.gear_ids(region)}
        self.shards = {shard.gear_id: shard for shard in region_shards(topology, region)}
        self.sink_reads_here = gears.labels_stream(topology.traits) == gears.BULK_STREAM

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
                shard = self.shards[gear]
                try:
                    sink = [await shard.sink_cursor()] if self.sink_reads_here else []
                    floor = min([*known.values(), *sink], default=0)
                    if floor > trimmed.get(gear, 0):
                        await shard.trim_stream(gears.BULK_STREAM, floor)
                        trimmed[gear] = floor
                except (RedisError, OSError) as exc:
                    log.warning("trim %s: %s", gear, exc)


def _encode_batches(batches: list[bulk_pb2.PayloadBatch]) -> list[bytes]:
    """A message per batch (each is acknowledged on its own), written together."""
    return [batch.SerializeToString() for batch in batches]


def _any_wants_heartbeats(shippers: list[GearShipper]) -> bool:
    return any(s.heartbeats for s in shippers)


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    local = topology.groups_at(region)
    destinations = [r for r in topology.region_names if r != region and local & topology.groups_at(r)]
    trimmer = Trimmer(topology, region, destinations)
    heartbeat_s = protocol_class(topology.protocol).bulk_heartbeat_s(topology)
    tails, shippers = [], []
    for shard, store in enumerate(region_shards(topology, region)):
        tail = GearTail(store, heartbeat_s)
        mine = [GearShipper(topology, region, shard, dest, trimmer, tail) for dest in destinations]
        tail.heartbeats_wanted = functools.partial(_any_wants_heartbeats, mine)
        tails.append(tail)
        shippers += mine
    log.info("bulk sender %s → %s", region, ", ".join(destinations) or "(nobody)")
    work = [trimmer.run(stop), *(t.run(stop) for t in tails), *(s.run(stop) for s in shippers)]
    if topology.traits.tree and topology.saturn.sink_in_bulk_sender:
        # One loop for both (tuning.py), and one read: the sink takes the labels from the tails.
        work.append(LabelSink(topology, region, [TailLabels(tail) for tail in tails]).run(stop))
    await asyncio.gather(*work)


def main() -> None:
    runtime.service_main(
        "bulk-sender: ships this region's payloads to replica regions", serve, fast_loop=True
    )


if __name__ == "__main__":
    main()
