"""Bulk-data transfer, receiving side: takes payload batches from remote regions' senders.

Exactly-once: each local shard stores, in the same Lua call that applies a batch, how far it has
got in the origin gear's stream. A sender that (re)connects is told that position and resumes
after it, so a crash on either side neither loses nor doubles an update.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import grpc

from causal_client.wan import DelayLine
from services import metrics, runtime
from services.proto import bulk_pb2, bulk_pb2_grpc
from services.protocols import Protocol, ReceivingSide, protocol_for
from services.region.store import RegionStore, RemoteUpdate
from services.region.sweeper import sweep_forever
from services.topology import Topology

log = logging.getLogger("bulk-receiver")
EMPTY_ACK_EVERY_S = 1.0  # how often batches without payloads are acknowledged (as a notice)


class BulkReceiverServicer(bulk_pb2_grpc.BulkReceiverServicer):
    def __init__(self, topology: Topology, region: str, store: RegionStore, protocol: Protocol):
        self.topology = topology
        self.region = region
        self.store = store
        self.protocol = protocol
        self.local_groups = topology.groups_at(region)
        self.remote_gears = {g: r for r in topology.region_names if r != region for g in topology.gear_ids(r)}
        self.ack_lines: set[DelayLine[bulk_pb2.Position | None]] = set()  # of the open streams

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
        for update in updates:
            visibility.observe(max(0.0, (now_us - update.origin_time_us) / 1e6))
        applied.inc(len(updates))

    async def Ship(self, request_iterator, context: grpc.aio.ServicerContext):
        try:
            first = await anext(request_iterator)
        except StopAsyncIteration:
            return
        if first.WhichOneof("kind") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a hello")
        gear = first.hello.origin_gear
        origin = self.remote_gears.get(gear)
        if origin is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown or local origin gear {gear!r}")
        acks: DelayLine[bulk_pb2.Position | None] = DelayLine(self.topology.wan_link(self.region, origin))
        position = await self.protocol.resume_position(gear)
        log.info("%s connected; resuming after ts %d", gear, position)
        acks.put(bulk_pb2.Position(through_ts=position, heartbeats=self.protocol.wants_heartbeats))
        self.ack_lines.add(acks)
        received = metrics.BULK_RECEIVED.labels(self.region, origin)

        def applied(updates: list[RemoteUpdate]) -> None:
            self.on_applied(origin, updates)

        last_ack = [time.monotonic()]

        async def consume() -> None:
            try:
                async for message in request_iterator:
                    batch = message.batch
                    unpacked = [RemoteUpdate.unpack(p.body) for p in batch.payloads]
                    # An atomic batch may span groups: each region applies the rows it replicates.
                    updates = [u for u in (x.only(self.local_groups) for x in unpacked) if u is not None]
                    if len(updates) < len(unpacked):
                        foreign = len(unpacked) - len(updates)
                        log.error("%s sent %d updates of groups not replicated here", gear, foreign)
                    received.inc(len(updates))
                    # Shielded: if the sender goes away mid-apply (the stream is cancelled), the
                    # batch the store may already have applied is still counted as applied.
                    await asyncio.shield(
                        self.protocol.accept_payloads(gear, batch.through_ts, updates, applied)
                    )
                    # Each batch with payloads is acknowledged (the sender's window); empty ones
                    # (heartbeats, progress) only once in a while, as a notice with the position,
                    # so that the sender can trim: an ack per heartbeat doubled their cost.
                    now = time.monotonic()
                    if batch.payloads or now - last_ack[0] >= EMPTY_ACK_EVERY_S:
                        durable = self.protocol.durable_position(gear, batch.through_ts)
                        acks.put(
                            bulk_pb2.Position(
                                through_ts=durable,
                                heartbeats=self.protocol.wants_heartbeats,
                                notice=not batch.payloads,
                            )
                        )
                        last_ack[0] = now
            finally:
                acks.put(None)

        consumer = asyncio.create_task(consume())
        try:
            while (ack := await acks.get()) is not None:
                yield ack
        finally:
            self.ack_lines.discard(acks)
            consumer.cancel()
        await consumer  # re-raises a failure to apply, which ends the stream with an error


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    store = RegionStore(topology, region)
    protocol = protocol_for(topology.protocol, store)
    servicer = BulkReceiverServicer(topology, region, store, protocol)
    server, health = runtime.new_server(topology.bulk_port(region), topology.bind_host(region))
    bulk_pb2_grpc.add_BulkReceiverServicer_to_server(servicer, server)
    side = ReceivingSide(server, health, servicer.on_applied, servicer.heartbeats_changed, stop)
    background = await protocol.start_receiving(side)
    await server.start()
    runtime.mark_serving(health)
    log.info("bulk receiver %s on %s (%s)", region, topology.bulk_endpoint(region), protocol.name)
    try:
        # A failure of the protocol's work (Saturn's proxy) ends the process (crash-only: the
        # supervisor starts it again, and it resumes from its watermarks), never a receiver that
        # acknowledges and applies nothing.
        await asyncio.gather(stop.wait(), sweep_forever(store, stop), *background)
    finally:
        await server.stop(grace=1)
        await store.close()


def main() -> None:
    runtime.service_main("bulk-receiver: applies payloads shipped from other regions", serve)


if __name__ == "__main__":
    main()
