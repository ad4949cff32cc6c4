"""A region's frontend (paper §4, Alg. 1): the gRPC service the client library talks to.

Stateless: several processes may share the port (SO_REUSEPORT). Each request carries the client's
label; the reply carries the label the client must merge.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import grpc
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from causal_client.claims import check_part, owner_region
from causal_client.label import Label, LabelType
from causal_client.proto import store_pb2, store_pb2_grpc
from services import metrics, runtime
from services.protocols import Protocol, protocol_for
from services.region.gears import ColumnChange, RowChange
from services.region.store import BadRequestForData, RegionStore
from services.region.validation import DEFAULT_SLICE, MAX_OPS, RequestError, Validator, invalid
from services.topology import Topology

log = logging.getLogger("frontend")


def rpc(op: str):
    """Counts the call and turns failures into gRPC statuses with readable messages."""

    def decorate(method):
        @functools.wraps(method)
        async def wrapper(self: StoreServicer, request, context: grpc.aio.ServicerContext):
            try:
                reply = await method(self, request, context)
            except RequestError as exc:
                metrics.OP_ERRORS.labels(self.region, op, exc.code.name).inc()
                await context.abort(exc.code, exc.message)
            except BadRequestForData as exc:
                metrics.OP_ERRORS.labels(self.region, op, "INVALID_ARGUMENT").inc()
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                metrics.OP_ERRORS.labels(self.region, op, "UNAVAILABLE").inc()
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"region {self.region} store: {exc}")
            except asyncio.CancelledError:
                raise  # the client went away
            except grpc.aio.AbortError:
                raise  # an abort from the handler itself (e.g. a protocol refusing an attach)
            except Exception as exc:
                log.exception("%s failed", op)
                metrics.OP_ERRORS.labels(self.region, op, "INTERNAL").inc()
                await context.abort(grpc.StatusCode.INTERNAL, f"{op} failed in region {self.region}: {exc}")
            metrics.OPS.labels(self.region, op).inc()
            return reply

        return wrapper

    return decorate


def _row_change(mutation: store_pb2.Mutation, replicate: bool) -> RowChange:
    changes = []
    for op in mutation.ops:
        kind = op.WhichOneof("op")
        if kind == "set":
            changes.append(ColumnChange("s", op.column, op.set))
        elif kind == "delete":
            changes.append(ColumnChange("d", op.column))
        else:
            changes.append(ColumnChange("i", op.column, op.increment))
    return RowChange(mutation.group, mutation.row, tuple(changes), replicate)


class StoreServicer(store_pb2_grpc.StoreServicer):
    def __init__(self, topology: Topology, region: str, store: RegionStore, protocol: Protocol):
        self.topology = topology
        self.region = region
        self.store = store
        self.protocol = protocol
        self.check = Validator(topology, region)
        # Groups whose rows must be shipped: replicated at some other region too.
        self.shipped_groups = {g for g, members in topology.group_members.items() if len(members) > 1}
        self._describe = self._build_describe()

    def _build_describe(self) -> store_pb2.DescribeReply:
        t = self.topology
        reply = store_pb2.DescribeReply(
            region=self.region, protocol=t.protocol, max_value_bytes=t.max_value_bytes
        )
        for r in t.regions:
            reply.regions.add(name=r.name, site=r.site, endpoint=t.frontend_endpoint(r.name))
        for g, members in t.group_members.items():
            reply.groups.add(name=g, regions=members)
        for a in t.sites:
            for b in t.sites:
                if a != b:
                    reply.latencies.add(from_site=a, to_site=b, one_way_ms=t.latency_ms_between(a, b))
        return reply

    @rpc("describe")
    async def Describe(self, request, context):
        return self._describe

    @rpc("attach")
    async def Attach(self, request: store_pb2.AttachRequest, context):
        label = self.check.label(request.label)
        remaining = context.time_remaining()
        started = time.perf_counter()
        try:
            await self.protocol.wait_attach(label, timeout=remaining)
        except TimeoutError as exc:
            raise RequestError(grpc.StatusCode.DEADLINE_EXCEEDED, str(exc)) from None
        if not label.is_zero:
            arriving = label.type == LabelType.MIGRATION and label.target == self.region
            kind = "migration" if arriving else "update"  # a migration label is a causal past elsewhere
            metrics.ATTACH_WAIT.labels(self.region, label.region, kind).observe(time.perf_counter() - started)
        return store_pb2.AttachReply(label=label.to_proto(), region=self.region)

    @rpc("read")
    async def Read(self, request: store_pb2.ReadRequest, context):
        client = self.check.label(request.label)
        self.check.read_op(request.op)
        rows, seen = await self.store.read([request.op], DEFAULT_SLICE)
        return store_pb2.ReadReply(label=client.merge(seen).to_proto(), row=rows[0])

    @rpc("multi_read")
    async def MultiRead(self, request: store_pb2.MultiReadRequest, context):
        client = self.check.label(request.label)
        if not request.ops:
            raise invalid("multi-read needs at least one read")
        if len(request.ops) > MAX_OPS:
            raise invalid(f"at most {MAX_OPS} reads per multi-read")
        for op in request.ops:
            self.check.read_op(op)
        rows, seen = await self.store.read(list(request.ops), DEFAULT_SLICE)
        return store_pb2.MultiReadReply(label=client.merge(seen).to_proto(), rows=rows)

    async def _write(self, client: Label, mutations) -> store_pb2.WriteReply:
        for mutation in mutations:
            self.check.mutation(mutation)
        rows = [_row_change(m, m.group in self.shipped_groups) for m in mutations]
        label = await self.store.write(client, rows, self.protocol.emits_labels)
        return store_pb2.WriteReply(label=client.merge(label).to_proto())

    @rpc("write")
    async def Write(self, request: store_pb2.WriteRequest, context):
        return await self._write(self.check.label(request.label), [request.mutation])

    @rpc("batch")
    async def Batch(self, request: store_pb2.BatchRequest, context):
        client = self.check.label(request.label)
        if not request.mutations:
            raise invalid("a batch needs at least one mutation")
        if len(request.mutations) > MAX_OPS:
            raise invalid(f"at most {MAX_OPS} mutations per batch")
        return await self._write(client, list(request.mutations))

    @rpc("claim")
    async def Claim(self, request: store_pb2.ClaimRequest, context):
        parts = {"namespace": request.namespace, "key": request.key, "holder": request.holder}
        for what, value in parts.items():
            problem = check_part(what, value)
            if problem:
                raise invalid(problem)
        owner = owner_region(self.topology.region_names, request.namespace, request.key)
        if owner != self.region:
            raise RequestError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"claims of {request.namespace}/{request.key} are decided by region {owner}, "
                f"not {self.region}",
            )
        if request.release:
            released = await self.store.release_claim(request.namespace, request.key, request.holder)
            holder = await self.store.claim_holder(request.namespace, request.key)
            return store_pb2.ClaimReply(granted=released, holder=holder or "")
        holder = await self.store.claim(request.namespace, request.key, request.holder)
        return store_pb2.ClaimReply(granted=holder == request.holder, holder=holder)

    @rpc("migrate")
    async def Migrate(self, request: store_pb2.MigrateRequest, context):
        client = self.check.label(request.label)
        self.check.region_name(request.target_region)
        label = await self.store.migrate(client, request.target_region, self.protocol.emits_labels)
        return store_pb2.MigrateReply(label=label.to_proto())


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    store = RegionStore(topology, region)
    servicer = StoreServicer(topology, region, store, protocol_for(topology.protocol, store))
    server, health = runtime.new_server(topology.frontend_port(region), topology.bind_host(region))
    store_pb2_grpc.add_StoreServicer_to_server(servicer, server)
    if index == 0:
        metrics.serve(topology.metrics_port(region), topology.bind_host(region))
    await server.start()
    runtime.mark_serving(health)
    log.info("frontend %s#%d serving on %s", region, index, topology.frontend_endpoint(region))
    await stop.wait()
    started = time.monotonic()
    await server.stop(grace=2)
    await store.close()
    log.info("frontend %s#%d stopped in %.2fs", region, index, time.monotonic() - started)


def main() -> None:
    runtime.service_main("frontend: a region's client-facing gRPC service", serve)


if __name__ == "__main__":
    main()
