"""A region's frontend (paper §4, Alg. 1): the gRPC service the client library talks to.

Stateless and without logic of its own: each call becomes one call of the gears' library in the
row's shard (services/region/lua), which checks it and does the work; a gear's refusal becomes a
gRPC status. Several processes may share the port (SO_REUSEPORT). Each request carries the
client's label; the reply carries the label the client must merge.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import grpc
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from causal_client import errors
from causal_client.data import Mutation, ReadSpec
from causal_client.label import Label
from causal_client.proto import store_pb2, store_pb2_grpc
from services import metrics, runtime
from services.protocols import Protocol, protocol_for
from services.region import gears
from services.region.store import RegionStore
from services.region.sync_shard import SyncShard
from services.topology import Topology

log = logging.getLogger("frontend")

# How a gear's refusal reaches a gRPC client (causal_client.errors.from_rpc_error reverses it).
STATUS_OF: tuple[tuple[type[errors.CausalError], grpc.StatusCode], ...] = (
    (errors.WrongPlace, grpc.StatusCode.FAILED_PRECONDITION),  # before its base class
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotReplicatedHere, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.UnknownRegion, grpc.StatusCode.NOT_FOUND),
    (errors.RegionUnavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.StoreTimeout, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.StoreFull, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.VersionMismatch, grpc.StatusCode.FAILED_PRECONDITION),
)


def _status(exc: errors.CausalError) -> grpc.StatusCode:
    return next((code for kind, code in STATUS_OF if isinstance(exc, kind)), grpc.StatusCode.INTERNAL)


def rpc(op: str):
    """Counts the call and turns failures into gRPC statuses with readable messages."""

    def decorate(method):
        @functools.wraps(method)
        async def wrapper(self: StoreServicer, request, context: grpc.aio.ServicerContext):
            try:
                reply = await method(self, request, context)
            except errors.CausalError as exc:
                code = _status(exc)
                metrics.OP_ERRORS.labels(self.region, op, code.name).inc()
                await context.abort(code, self._details(exc, request))
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                metrics.OP_ERRORS.labels(self.region, op, "UNAVAILABLE").inc()
                await context.abort(grpc.StatusCode.UNAVAILABLE, f"region {self.region} store: {exc}")
            except asyncio.CancelledError:
                raise  # the client went away
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                log.exception("%s failed", op)
                metrics.OP_ERRORS.labels(self.region, op, "INTERNAL").inc()
                await context.abort(grpc.StatusCode.INTERNAL, f"{op} failed in region {self.region}: {exc}")
            metrics.OPS.labels(self.region, op).inc()
            return reply

        return wrapper

    return decorate


def _label(msg: store_pb2.Label) -> Label:
    try:
        return Label.from_proto(msg)
    except errors.InvalidLabel as exc:
        raise errors.InvalidLabel(f"label: {exc}") from None


def _groups(request) -> list[str]:
    fields = request.DESCRIPTOR.fields_by_name
    items = [getattr(request, f) for f in ("op", "mutation") if f in fields]
    items += [item for f in ("ops", "mutations") if f in fields for item in getattr(request, f)]
    return [item.group for item in items]


class StoreServicer(store_pb2_grpc.StoreServicer):
    def __init__(self, topology: Topology, region: str, store: RegionStore, protocol: Protocol):
        self.topology = topology
        self.region = region
        self.store = store
        self.protocol = protocol
        self.local_groups = topology.groups_at(region)
        self._describe = self._build_describe()

    def _details(self, exc: errors.CausalError, request) -> str:
        """The status's message; a group not replicated here is named in a form the client parses
        (``errors.NOT_REPLICATED_MARKER``)."""
        if isinstance(exc, errors.NotReplicatedHere):
            group = next((g for g in _groups(request) if g not in self.local_groups), "")
            return f"{errors.NOT_REPLICATED_MARKER}{group}:{self.region}:{exc}"
        code = errors.code_of(exc)
        if code and _status(exc) == grpc.StatusCode.FAILED_PRECONDITION:
            return f"{code} {exc}"  # the client maps it back to the same class
        return str(exc)

    def _build_describe(self) -> store_pb2.DescribeReply:
        t = self.topology
        reply = store_pb2.DescribeReply(
            region=self.region,
            protocol=t.protocol,
            max_value_bytes=t.max_value_bytes,
            vectors=t.traits.vectors,
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
        label = _label(request.label)
        try:
            await self.protocol.wait_attach(label, timeout=context.time_remaining())
        except TimeoutError as exc:
            raise errors.StoreTimeout(str(exc)) from None
        return store_pb2.AttachReply(label=label.to_proto(), region=self.region)

    @rpc("read")
    async def Read(self, request: store_pb2.ReadRequest, context):
        client = _label(request.label)
        result = await self.store.read(client, [ReadSpec.from_proto(request.op)], request.floor)
        merged = client.merge(result.seen).to_proto()
        return store_pb2.ReadReply(label=merged, row=result.rows[0].to_proto(), floor=result.floor)

    @rpc("multi_read")
    async def MultiRead(self, request: store_pb2.MultiReadRequest, context):
        client = _label(request.label)
        result = await self.store.read(client, [ReadSpec.from_proto(op) for op in request.ops], request.floor)
        rows_pb = [row.to_proto() for row in result.rows]
        merged = client.merge(result.seen).to_proto()
        return store_pb2.MultiReadReply(label=merged, rows=rows_pb, floor=result.floor)

    async def _write(self, client: Label, mutations, atomic: bool = True) -> store_pb2.WriteReply:
        label = await self.store.write(client, [Mutation.from_proto(m) for m in mutations], atomic)
        return store_pb2.WriteReply(label=client.merge(label).to_proto())

    @rpc("write")
    async def Write(self, request: store_pb2.WriteRequest, context):
        return await self._write(_label(request.label), [request.mutation])

    @rpc("batch")
    async def Batch(self, request: store_pb2.BatchRequest, context):
        return await self._write(_label(request.label), list(request.mutations), not request.not_atomic)

    @rpc("claim")
    async def Claim(self, request: store_pb2.ClaimRequest, context):
        r = request
        granted, holder = await self.store.claim(r.namespace, r.key, r.holder, r.release)
        return store_pb2.ClaimReply(granted=granted, holder=holder)

    @rpc("migrate")
    async def Migrate(self, request: store_pb2.MigrateRequest, context):
        label = await self.store.migrate(_label(request.label), request.target_region)
        return store_pb2.MigrateReply(label=label.to_proto())


async def serve(topology: Topology, region: str, index: int, stop: asyncio.Event) -> None:
    store = RegionStore(topology, region)
    await store.install()
    servicer = StoreServicer(topology, region, store, protocol_for(topology.protocol, store))
    server, health = runtime.new_server(topology.frontend_port(region), topology.bind_host(region))
    store_pb2_grpc.add_StoreServicer_to_server(servicer, server)
    if index == 0:
        waits_key = gears.shard_key(gears.ATTACH_WAITS_KEY, topology.shard_tag(region, 0))
        waits = metrics.AttachWaits(region, SyncShard(topology, region, 0, timeout=2.0), waits_key)
        metrics.serve(topology.metrics_port(region), topology.bind_host(region), collectors=[waits])
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
