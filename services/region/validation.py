"""Checks on client requests, so that bad input gets a clear gRPC status, never a crash."""

from __future__ import annotations

import time

import grpc

from causal_client.errors import NOT_REPLICATED_MARKER, InvalidLabel
from causal_client.label import Label
from causal_client.proto import store_pb2
from services.topology import Topology

MAX_KEY_BYTES = 1024
MAX_OPS = 1000
MAX_SLICE = 1000
MAX_ROW_COLUMNS = 10_000  # a whole-row read of a wider row is refused: read it in slices
DEFAULT_SLICE = 40
MAX_FUTURE_S = 60.0  # a label further ahead of this region's clock is refused as forged


class RequestError(Exception):
    """A request that cannot be served: carries the gRPC status code and a readable message."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> RequestError:
    return RequestError(grpc.StatusCode.INVALID_ARGUMENT, message)


class Validator:
    def __init__(self, topology: Topology, region: str):
        self.topology = topology
        self.region = region
        self.local_groups = topology.groups_at(region)
        self.gears = {g for r in topology.region_names for g in topology.gear_ids(r)}

    def label(self, msg: store_pb2.Label) -> Label:
        try:
            label = Label.from_proto(msg)
        except InvalidLabel as exc:
            raise invalid(f"label: {exc}") from None
        if label.is_zero:
            return label
        if label.src not in self.gears:
            raise invalid(f"label: unknown source gear {label.src!r}")
        ahead = label.ts / 1e6 - time.time()
        if ahead > MAX_FUTURE_S:
            raise invalid(f"label: timestamp is {ahead:.0f} s in the future")
        return label

    def group(self, group: str) -> None:
        if not group:
            raise invalid("group must not be empty")
        if group not in self.topology.group_members:
            raise invalid(f"unknown group {group!r}")
        if group not in self.local_groups:
            regions = ",".join(self.topology.group_members[group])
            raise RequestError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{NOT_REPLICATED_MARKER}{group}:{self.region}:group {group!r} is not replicated at "
                f"region {self.region!r} (replicas: {regions})",
            )

    @staticmethod
    def name(kind: str, value: str) -> None:
        if not value:
            raise invalid(f"{kind} must not be empty")
        if len(value.encode()) > MAX_KEY_BYTES:
            raise invalid(f"{kind} longer than {MAX_KEY_BYTES} bytes")

    def read_op(self, op: store_pb2.ReadOp) -> None:
        self.group(op.group)
        self.name("row key", op.row)
        if len(op.columns) > MAX_OPS:
            raise invalid(f"at most {MAX_OPS} columns per read")
        for column in op.columns:
            self.name("column name", column)
        if op.HasField("slice"):
            if op.columns:
                raise invalid("a read names columns or a slice, not both")
            if op.slice.limit > MAX_SLICE:
                raise invalid(f"slice limit must be at most {MAX_SLICE}, got {op.slice.limit}")

    def mutation(self, mutation: store_pb2.Mutation) -> None:
        self.group(mutation.group)
        self.name("row key", mutation.row)
        if not mutation.ops:
            raise invalid("a mutation needs at least one column operation")
        if len(mutation.ops) > MAX_OPS:
            raise invalid(f"at most {MAX_OPS} column operations per mutation")
        for op in mutation.ops:
            self.name("column name", op.column)
            kind = op.WhichOneof("op")
            if kind is None:
                raise invalid(f"column {op.column!r}: no operation (set, delete or increment)")
            if kind == "set" and len(op.set) > self.topology.max_value_bytes:
                raise invalid(
                    f"column {op.column!r}: value of {len(op.set)} bytes exceeds the limit of "
                    f"{self.topology.max_value_bytes} bytes"
                )
            if kind == "delete" and not op.delete:
                raise invalid(f"column {op.column!r}: delete must be true")

    def region_name(self, name: str) -> None:
        if name not in self.topology.region_names:
            raise RequestError(grpc.StatusCode.NOT_FOUND, f"unknown region {name!r}")
