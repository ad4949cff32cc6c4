"""Bulk-data transfer, receiving side: takes payload batches from remote regions' senders.

Exactly-once: each local shard stores, in the same Lua call that applies a batch, how far it has
got in the origin gear's stream. A sender that (re)connects is told that position and resumes
after it, so a crash on either side neither loses nor doubles an update.

The link's emulated latency is served here, on arrival (a ``DelayLine`` per connection), not by
the sender: bytes on a real wire arrive after their sender died, and a region stopped with its
payloads held in its own memory took them away while their labels, already in the tree, went on
and held back every later label elsewhere until it came back. What a receiver holds when it dies
is sent again (its position says from where). A sender that reconnects is answered once the
previous connection's batches have all been taken.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from google.protobuf.message import DecodeError

from services import metrics, runtime
from services.labelpath.stages import Stage
from services.proto import bulk_pb2
from services.protocols import Protocol, ReceivingSide, protocol_for
from services.region.remote_update import RemoteUpdate
from services.region.store import RegionStore
from services.region.sweeper import sweep_forever
from services.topology import Topology
from services.transport.connection import Connection
from services.transport.delayed import DelayedWrites
from services.transport.errors import LinkClosed
from services.transport.server import LinkServer
from services.wan import DelayLine

log = logging.getLogger("bulk-receiver")
EMPTY_ACK_EVERY_S = 1.0  # how often batches without payloads are acknowledged (as a notice)
BULK = "bulk"  # the link-transport service, on the region's bulk port
Arrived = tuple[bulk_pb2.PayloadBatch, list[RemoteUpdate]]  # a batch as read, its payloads unpacked


class BulkReceiver:
    """The ``bulk`` service: one connection per origin gear that ships here."""

    def __init__(self, topology: Topology, region: str, store: RegionStore, protocol: Protocol):
        self.topology = topology
        self.region = region
        self.store = store
        self.protocol = protocol
        self.local_groups = topology.groups_at(region)
        self.remote_gears = {g: r for r in topology.region_names if r != region for g in topology.gear_ids(r)}
        self.ack_lines: set[DelayedWrites[bulk_pb2.Position]] = set()  # of the open connections
        # origin gear → its last connection, done once its batches have all been taken
        self.connections: dict[str, asyncio.Future[None]] = {}
        self.payload_stage = Stage(region, "payload")
        self.visible_stage = Stage(region, "visible")

    def heartbeats_changed(self) -> None:
        """Tells every connected sender whether heartbeats are wanted now (the protocol's mode
        changed): they cost CPU on both sides, so they flow only while they are needed."""
        wanted = self.protocol.wants_heartbeats
        for acks in self.ack_lines:
            acks.put(bulk_pb2.Position(heartbeats=wanted, notice=True))

    @functools.cache  # noqa: B019 (one servicer per process, one pair per origin)
    def applied_metrics(self, origin_region: str):
        return (
            metrics.VISIBILITY.labels(self.region, origin_region),
            metrics.REMOTE_APPLIED.labels(self.region, origin_region),
        )

    def on_applied(self, origin_region: str, updates: list[RemoteUpdate]) -> None:
        now_us = time.time() * 1e6
        visibility, applied = self.applied_metrics(origin_region)
        metrics.observe_many(visibility, [max(0.0, (now_us - u.origin_time_us) / 1e6) for u in updates])
        applied.inc(len(updates))
        self.visible_stage.updates(updates)

    async def ship(self, connection: Connection, hello_bytes: bytes) -> None:
        """One origin gear's payloads, in order: the position to resume from first (the accept),
        then each batch handed to the protocol, an acknowledgement back per batch with payloads
        (the sender's window; delayed by the link's latency like everything that crosses it)."""
        try:
            gear = bulk_pb2.Hello.FromString(hello_bytes).origin_gear
        except DecodeError:
            connection.refuse("a bulk link's hello must be a Hello")
            return
        origin = self.remote_gears.get(gear)
        if origin is None:
            connection.refuse(f"unknown or local origin gear {gear!r}")
            return
        previous = self.connections.get(gear)
        taken = self.connections[gear] = asyncio.get_running_loop().create_future()
        try:
            if previous is not None:  # its batches still in the delay line go first (module doc)
                await asyncio.shield(previous)
            await self._serve_link(gear, origin, connection)
        finally:
            taken.set_result(None)
            if self.connections.get(gear) is taken:
                del self.connections[gear]

    async def _serve_link(self, gear: str, origin: str, connection: Connection) -> None:
        position = await self.protocol.resume_position(gear)
        log.info("%s connected; resuming after ts %d", gear, position)
        connection.accept(
            bulk_pb2.Position(
                through_ts=position, heartbeats=self.protocol.wants_heartbeats
            ).SerializeToString()
        )
        acks: DelayedWrites[bulk_pb2.Position] = DelayedWrites(
            self.topology.wan_link(self.region, origin), _encode_positions
        )
        acks.attach(connection)
        self.ack_lines.add(acks)
        self.protocol.bulk_link(gear, opened=True)
        try:
            await self._consume(gear, origin, connection, acks)
        finally:
            self.protocol.bulk_link(gear, opened=False)
            self.ack_lines.discard(acks)
            acks.detach()

    async def _consume(
        self, gear: str, origin: str, connection: Connection, acks: DelayedWrites[bulk_pb2.Position]
    ) -> None:
        """Reads the connection into the link's delay line (to its end) while taking what has
        arrived (module doc), in order, then what is left once it ended."""
        line: DelayLine[Arrived | None] = DelayLine(self.topology.wan_link(origin, self.region))
        reader = asyncio.ensure_future(_read_batches(gear, connection, line))
        try:
            await self._take(gear, origin, line, acks)
        finally:
            reader.cancel()

    async def _take(
        self, gear: str, origin: str, line: DelayLine[Arrived | None], acks: DelayedWrites[bulk_pb2.Position],
    ) -> None:  # fmt: skip
        received = metrics.BULK_RECEIVED.labels(self.region, origin)

        def applied(updates: list[RemoteUpdate]) -> None:
            self.on_applied(origin, updates)

        last_ack, acked, through = time.monotonic(), 0, None

        def acknowledge(durable: int, notice: bool) -> None:
            nonlocal last_ack, acked
            acked = durable
            acks.put(
                bulk_pb2.Position(through_ts=acked, heartbeats=self.protocol.wants_heartbeats, notice=notice)
            )
            last_ack = time.monotonic()

        while True:
            quiet_s = None if len(line) else EMPTY_ACK_EVERY_S  # something on its way: no quiet
            try:
                async with asyncio.timeout(quiet_s):  # (nothing is taken from the line if it fires)
                    due = await line.get_due()
            except TimeoutError:
                # Nothing came for a while (no heartbeats: eventual, saturn's tree order): what was
                # applied since the last acknowledgement (a lane let go has finished, a label came
                # and its payloads were applied) is said as a notice, so that the sender trims its
                # stream to the end, not to the last batch.
                if through is not None and (durable := self.protocol.durable_position(gear, through)) > acked:
                    acknowledge(durable, notice=True)
                continue
            for arrived in due:  # what is due at once, taken in one turn
                if arrived is None:
                    return
                batch, unpacked = arrived
                # An atomic batch may span groups: each region applies the rows it replicates.
                updates = [u for u in (x.only(self.local_groups) for x in unpacked) if u is not None]
                if len(updates) < len(unpacked):
                    foreign = len(unpacked) - len(updates)
                    log.error("%s sent %d updates of groups not replicated here", gear, foreign)
                received.inc(len(updates))
                self.payload_stage.updates(updates)
                # Shielded: if the process is stopped mid-apply, the batch the store may already
                # have applied is still counted as applied.
                await asyncio.shield(self.protocol.accept_payloads(gear, batch.through_ts, updates, applied))
                through = batch.through_ts
                # Each batch with payloads is acknowledged (the sender's window); empty ones
                # (heartbeats, progress) only once in a while, as a notice with the position,
                # so that the sender can trim: an ack per heartbeat doubled their cost.
                if batch.payloads or time.monotonic() - last_ack >= EMPTY_ACK_EVERY_S:
                    acknowledge(self.protocol.durable_position(gear, batch.through_ts), not batch.payloads)


async def _read_batches(gear: str, connection: Connection, line: DelayLine[Arrived | None]) -> None:
    """Each batch into the line as it is read; a batch that does not parse ends the connection,
    and it and what follows are never applied. None, delayed like the rest, marks the end."""
    try:
        while True:
            try:
                bodies = await connection.receive()
            except LinkClosed:
                return
            for body in bodies:
                try:
                    batch = bulk_pb2.PayloadBatch.FromString(body)
                    unpacked = [RemoteUpdate.unpack(p.body) for p in batch.payloads]
                except (DecodeError, ValueError, TypeError, AttributeError) as exc:
                    connection.abort(f"{gear} sent a batch that does not parse: {exc}")
                    return
                line.put((batch, unpacked))
    finally:
        line.put(None)


def _encode_positions(positions: list[bulk_pb2.Position]) -> list[bytes]:
    return [position.SerializeToString() for position in positions]


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    store = RegionStore(topology, region)
    protocol = protocol_for(topology.protocol, store)
    receiver = BulkReceiver(topology, region, store, protocol)
    server = LinkServer(f"{region}'s bulk receiver", topology.bind_host(region), topology.bulk_port(region))
    server.add(BULK, receiver.ship)
    side = ReceivingSide(server, server.health, receiver.on_applied, receiver.heartbeats_changed, stop)
    background = await protocol.start_receiving(side)
    await server.start()
    log.info("bulk receiver %s on %s (%s)", region, topology.bulk_endpoint(region), protocol.name)
    try:
        # A failure of the protocol's work (Saturn's proxy) ends the process (crash-only: the
        # supervisor starts it again, and it resumes from its watermarks), never a receiver that
        # acknowledges and applies nothing.
        await asyncio.gather(stop.wait(), sweep_forever(store, stop), *background)
    finally:
        await server.stop()
        await store.close()


def main() -> None:
    runtime.service_main("bulk-receiver: applies payloads shipped from other regions", serve, fast_loop=True)


if __name__ == "__main__":
    main()
