"""Calls through a region's gRPC frontend (the gateway), for clients that cannot reach the
stores themselves. The frontend turns each call into the same gear calls a direct client makes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import grpc

from causal_client import tls
from causal_client.data import Mutation, ReadSpec, Row
from causal_client.errors import from_rpc_error
from causal_client.label import Label
from causal_client.proto import store_pb2, store_pb2_grpc
from causal_client.transactions import ReadResult
from causal_client.transport import Transport

OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


class GatewayTransport(Transport):
    """One gRPC channel per region's frontend; ``metadata`` carries the deployment's secret."""

    def __init__(self, endpoint_of: Callable[[str], str], metadata: tuple, timeout: float):
        self.endpoint_of = endpoint_of
        self.metadata = metadata
        self.timeout = timeout
        self._stubs: dict[str, store_pb2_grpc.StoreStub] = {}
        self._channels: list[grpc.Channel] = []
        self._lock = threading.Lock()

    def _stub(self, region: str) -> store_pb2_grpc.StoreStub:
        with self._lock:
            if region not in self._stubs:
                channel = tls.grpc_channel(self.endpoint_of(region), OPTIONS)
                self._channels.append(channel)
                self._stubs[region] = store_pb2_grpc.StoreStub(channel)
            return self._stubs[region]

    def _call(self, region: str, method: str, request, timeout: float | None = None):
        try:
            return getattr(self._stub(region), method)(
                request, timeout=timeout or self.timeout, metadata=self.metadata
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def read(self, region: str, label: Label, specs: Sequence[ReadSpec], floor: int = 0) -> ReadResult:
        if len(specs) == 1:
            request = store_pb2.ReadRequest(label=label.to_proto(), op=specs[0].to_proto(), floor=floor)
            reply = self._call(region, "Read", request)
            rows = [reply.row]
        else:
            ops = [s.to_proto() for s in specs]
            many = store_pb2.MultiReadRequest(label=label.to_proto(), ops=ops, floor=floor)
            reply = self._call(region, "MultiRead", many)
            rows = list(reply.rows)
        return ReadResult([Row.from_proto(r) for r in rows], Label.from_proto(reply.label), reply.floor)

    def write(self, region: str, label: Label, mutations: Sequence[Mutation], atomic: bool = True) -> Label:
        if len(mutations) == 1:
            request = store_pb2.WriteRequest(label=label.to_proto(), mutation=mutations[0].to_proto())
            return Label.from_proto(self._call(region, "Write", request).label)
        muts = [m.to_proto() for m in mutations]
        batch = store_pb2.BatchRequest(label=label.to_proto(), mutations=muts, not_atomic=not atomic)
        return Label.from_proto(self._call(region, "Batch", batch).label)

    def migrate(self, region: str, label: Label, target: str) -> Label:
        request = store_pb2.MigrateRequest(label=label.to_proto(), target_region=target)
        return Label.from_proto(self._call(region, "Migrate", request).label)

    def attach(self, region: str, label: Label, timeout: float) -> None:
        self._call(region, "Attach", store_pb2.AttachRequest(label=label.to_proto()), timeout)

    def claim(self, region: str, namespace: str, key: str, holder: str, release: bool) -> tuple[bool, str]:
        request = store_pb2.ClaimRequest(namespace=namespace, key=key, holder=holder, release=release)
        reply = self._call(region, "Claim", request)
        return reply.granted, reply.holder

    def close(self) -> None:
        with self._lock:
            for channel in self._channels:
                channel.close()
            self._channels.clear()
            self._stubs.clear()
