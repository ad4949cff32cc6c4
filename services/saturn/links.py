"""Directed FIFO links of the serializer tree, with WAN emulation.

A link u→v is one gRPC client stream from u to v's ``Deliver``: one stream, so one order. The
sender holds batches in a :class:`DelayLine` for the link's latency (WAN latency between the two
sites plus the edge's artificial delay, paper §5.4), then writes them to the stream.

A stream is reliable while it lasts; labels are lost only when one ends (a process died with
labels in memory, or a connection with labels in flight). So the receiving end reports every
incoming stream that ends, and every stream from a neighbour after its first, as a possible
loss (``on_lost``): a serializer forwards a gap label, a remote proxy falls back to timestamp
order (paper §6.1). Waiting for silence instead would miss an outage shorter than the silence.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable

import grpc

from causal_client.wan import DelayLine, Link
from services import auth, runtime
from services.proto import saturn_pb2, saturn_pb2_grpc
from services.topology import Topology

log = logging.getLogger("tree-link")

RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0)
HEARTBEAT_SLACK_S = 0.1  # per hop
HEARTBEAT_MAX_AGE_S = 0.3  # in all: well under the 1.5 s of silence that means "tree down"
#: "0" sends heartbeats without slack, to measure what it buys; see loadtest/bench.
HEARTBEAT_SLACK_ENV = "SATURN_HEARTBEAT_SLACK"
KNOWN_TYPES = frozenset(saturn_pb2.TreeLabelType.values())
OnBatch = Callable[[str, saturn_pb2.LabelBatch], Awaitable[None] | None]
OnLost = Callable[[str], None]

_SLACK_ON = os.environ.get(HEARTBEAT_SLACK_ENV, "1") != "0"


def heartbeat_slack(labels: list[saturn_pb2.TreeLabel], link: Link) -> float:
    """How much longer than the link's latency a batch may wait for company: heartbeats only
    need to arrive, and at seven regions they were most of an idle tree's messages (each costs a
    wake-up per hop). Up to HEARTBEAT_SLACK_S per hop, and never past HEARTBEAT_MAX_AGE_S after
    the heartbeat was made, so that liveness (TREE_SILENCE_S) is unaffected. Real labels: none."""
    if any(label.type != saturn_pb2.TREE_HEARTBEAT for label in labels) or not _SLACK_ON:
        return 0.0
    age_at_arrival = time.time() + link.latency_s - min(label.ts for label in labels) / 1e6
    return min(HEARTBEAT_SLACK_S, max(0.0, HEARTBEAT_MAX_AGE_S - age_at_arrival))


class OutgoingLink:
    """The sending end of the tree link ``node → neighbour``; reconnects after failures."""

    def __init__(self, topology: Topology, node: str, neighbour: str):
        self.node = node
        self.neighbour = neighbour
        self.endpoint = topology.tree_endpoint(neighbour)
        self.line: DelayLine[saturn_pb2.LabelBatch] = DelayLine(topology.wan_link(node, neighbour, tree=True))
        self.connected = asyncio.Event()
        self.sent_batches = 0

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        if labels:
            self.send_batch(saturn_pb2.LabelBatch(labels=labels))

    def send_batch(self, batch: saturn_pb2.LabelBatch) -> None:
        """Sends a batch as it is (a serializer forwards what it received without copying it)."""
        if batch.labels:
            self.line.put(batch, heartbeat_slack(batch.labels, self.line.link))

    async def run(self, stop: asyncio.Event) -> None:
        backoff = runtime.Backoff(RETRY_S)
        while not stop.is_set():
            try:
                await runtime.unless_stopped(stop, self._stream(stop))
                backoff.reset()
            except grpc.aio.AioRpcError as exc:
                if self.connected.is_set():
                    backoff.reset()  # it had worked: retry fast (proxies fall back after 0.3 s)
                delay = backoff.next_delay()
                if not stop.is_set():
                    log.warning("%s → %s: %s %s; retrying in %.2fs", self.node, self.neighbour,
                                exc.code().name, exc.details(), delay)  # fmt: skip
                await runtime.sleep_or_stop(stop, delay)
            finally:
                self.connected.clear()

    async def _stream(self, stop: asyncio.Event) -> None:
        async with grpc.aio.insecure_channel(self.endpoint, options=runtime.GRPC_OPTIONS) as channel:
            await channel.channel_ready()

            async def messages():
                yield saturn_pb2.TreeMessage(hello=saturn_pb2.Hello(node=self.node))
                self.connected.set()
                log.info("%s → %s: connected", self.node, self.neighbour)
                while not stop.is_set():
                    due = await self.line.get_due()
                    self.sent_batches += 1
                    if len(due) == 1:
                        yield saturn_pb2.TreeMessage(batch=due[0])
                    else:  # batches that piled up go as one, in order
                        merged = saturn_pb2.LabelBatch(labels=[x for b in due for x in b.labels])
                        yield saturn_pb2.TreeMessage(batch=merged)

            stub = saturn_pb2_grpc.TreeNodeStub(channel)
            await stub.Deliver(messages(), metadata=auth.call_metadata())  # raises the stream's error


class TreeNodeServicer(saturn_pb2_grpc.TreeNodeServicer):
    """The receiving end of every link into a node: hands each batch, with its sender, on."""

    def __init__(
        self, node: str, neighbours: tuple[str, ...], on_batch: OnBatch, on_lost: OnLost | None = None
    ):
        self.node = node
        self.neighbours = set(neighbours)
        self.on_batch = on_batch
        self.on_lost = on_lost  # told of a link from a neighbour that may have lost labels
        self.streams_opened: dict[str, int] = {}  # per neighbour, since this process started

    async def Deliver(self, request_iterator, context: grpc.aio.ServicerContext):
        first = await anext(request_iterator, None)
        if first is None:
            return saturn_pb2.DeliverReply()
        if first.WhichOneof("kind") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a hello")
        sender = first.hello.node
        if sender not in self.neighbours:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{sender!r} is not a tree neighbour of {self.node!r} "
                f"(neighbours: {sorted(self.neighbours)})",
            )
        opened = self.streams_opened.get(sender, 0)
        self.streams_opened[sender] = opened + 1
        log.info("%s ← %s: link open", self.node, sender)
        if opened:  # re-opened: whatever the old stream still carried may be gone
            self.lost(sender)
        try:
            await self._consume(sender, request_iterator, context)
        finally:
            log.info("%s ← %s: link closed", self.node, sender)
            self.lost(sender)
        return saturn_pb2.DeliverReply()

    async def _consume(self, sender: str, request_iterator, context: grpc.aio.ServicerContext) -> None:
        async for message in request_iterator:
            if message.WhichOneof("kind") != "batch":
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected label batches after hello")
            for label in message.batch.labels:
                if label.type not in KNOWN_TYPES:
                    await context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT, f"label of unknown type {label.type} from {sender}"
                    )
            result = self.on_batch(sender, message.batch)
            if asyncio.iscoroutine(result):
                await result

    def lost(self, sender: str) -> None:
        if self.on_lost is not None:
            self.on_lost(sender)
