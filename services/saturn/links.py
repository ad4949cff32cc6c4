"""Directed FIFO links of the serializer tree, with WAN emulation.

A link u→v is one gRPC client stream from u to v's ``Deliver``: one stream, so one order. The
sender holds batches in a :class:`DelayLine` for the link's latency (WAN latency between the two
sites plus the edge's artificial delay, paper §5.4), then writes them to the stream.

A stream is reliable while it lasts; labels are lost only when one ends (a process died with
labels in memory, or a connection with labels in flight). So the receiving end reports every
incoming stream that ends, and every stream from a neighbour after its first, as a possible
loss (``on_lost``): a serializer forwards a gap label, a remote proxy falls back to timestamp
order (paper §6.1). Waiting for silence instead would miss an outage shorter than the silence.

Every link belongs to one tree, named by its epoch in the hello: during a reconfiguration (§6.2)
a region's proxy hears the old tree and the new one side by side (proxy.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable

import grpc

from causal_client.wan import DelayLine, Link
from services import auth, runtime
from services.proto import saturn_pb2, saturn_pb2_grpc
from services.topology import Topology
from services.tuning import SaturnTuning

log = logging.getLogger("tree-link")

#: "0" sends heartbeats without slack, to measure what it buys; see loadtest/bench.
HEARTBEAT_SLACK_ENV = "SATURN_HEARTBEAT_SLACK"
KNOWN_TYPES = frozenset(saturn_pb2.TreeLabelType.values())
ACCEPTED = "tree-link-accepted"  # initial metadata of a link the receiver took: labels may flow
LAST_SEQ = "tree-link-last-seq"  # ... and, on a resumable link, the last batch it has from the sender
RESEND_KEEP_S = 10.0  # a resumable link keeps what it sent this long, to resend after a failover
FAILOVER_S = 0.02  # a resumable link whose receiver failed tries the next replica after this
OnBatch = Callable[[str, saturn_pb2.LabelBatch, int], Awaitable[None] | None]  # sender, batch, epoch
OnLost = Callable[[str, int], None]  # sender, epoch
#: Whether a (sender, epoch) may open a link here: None if so, else why not.
Accepts = Callable[[str, int], Awaitable[str | None]]

_SLACK_ON = os.environ.get(HEARTBEAT_SLACK_ENV, "1") != "0"


def heartbeat_slack(labels: list[saturn_pb2.TreeLabel], link: Link, tuning: SaturnTuning) -> float:
    """How much longer than the link's latency a batch may wait for company: heartbeats only
    need to arrive, and at seven regions they were most of an idle tree's messages (each costs a
    wake-up per hop). Up to ``heartbeat_slack_s`` per hop, and never past ``heartbeat_max_age_s``
    after the heartbeat was made, so that liveness (``tree_silence_s``) is unaffected (the
    topology's [saturn] table checks that they agree). Real labels: none."""
    if any(label.type != saturn_pb2.TREE_HEARTBEAT for label in labels) or not _SLACK_ON:
        return 0.0
    age_at_arrival = time.time() + link.latency_s - min(label.ts for label in labels) / 1e6
    return min(tuning.heartbeat_slack_s, max(0.0, tuning.heartbeat_max_age_s - age_at_arrival))


class OutgoingLink:
    """The sending end of the tree link ``node → neighbour``; reconnects after failures.

    Resumable (towards a replica group, or from one: ``resumable``): every batch is numbered,
    and what was sent is kept for ``RESEND_KEEP_S``; a new stream starts after the last number
    the receiver reports having, so a replica's death loses nothing. The neighbour's replicas
    are tried in turn (a backup refuses: only the primary takes labels). Should the receiver
    lack something no longer kept, a gap label goes first (labels may have been lost)."""

    def __init__(
        self, topology: Topology, node: str, neighbour: str, resumable: bool | None = None,
        incarnation: str | None = None, direct: bool = False,
    ):  # fmt: skip
        """``direct``: a link between two regions outside any tree (c3), paying the WAN only."""
        self.node = node
        self.neighbour = neighbour
        self.epoch = topology.epoch
        self.tuning = topology.saturn
        self.retired = False  # a newer tree took over: once this stream ends, it is not re-opened
        site = topology.node_site(node)  # a link with a bandwidth: through its relay, as metadata
        self.endpoints = [topology.relays.route(site, e, "meta") for e in topology.tree_endpoints(neighbour)]
        self.endpoint = self.endpoints[0]
        self.resumable = topology.replicas(neighbour) > 1 if resumable is None else resumable
        self.incarnation = incarnation or uuid.uuid4().hex
        self.seq = 0  # the last number given (resumable)
        self.kept: deque[tuple[int, float, saturn_pb2.LabelBatch]] = deque()  # (seq, when, batch) sent
        self.trimmed_through = 0  # the last seq no longer kept
        link = topology.wan_link(node, neighbour, tree=not direct)
        self.line: DelayLine[saturn_pb2.LabelBatch] = DelayLine(link)
        self.connected = asyncio.Event()
        self.sent_batches = 0

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        if labels:
            self.send_batch(saturn_pb2.LabelBatch(labels=labels))

    def send_batch(self, batch: saturn_pb2.LabelBatch, seq: int | None = None) -> None:
        """Sends a batch as it is (a serializer forwards what it received without copying it);
        on a resumable link numbered ``seq`` (a replica group's log position) or the next number."""
        if not batch.labels:
            return
        if self.resumable:
            batch = self._numbered(batch, seq)
        self.line.put(batch, heartbeat_slack(batch.labels, self.line.link, self.tuning))

    def _numbered(self, batch: saturn_pb2.LabelBatch, seq: int | None) -> saturn_pb2.LabelBatch:
        self.seq = seq if seq is not None else self.seq + 1
        if batch.seq == self.seq:
            return batch
        numbered = saturn_pb2.LabelBatch()  # the batch may be shared with other links: a copy
        numbered.CopyFrom(batch)
        numbered.seq = self.seq
        return numbered

    def preload(self, batches: list[tuple[int, saturn_pb2.LabelBatch]]) -> None:
        """A replica taking over: what its log holds counts as sent (the old primary may have
        sent it): the next stream resends whatever of it the receiver lacks."""
        now = time.monotonic()
        self.kept.extend((seq, now, self._numbered(batch, seq)) for seq, batch in batches if batch.labels)

    def retire(self) -> None:
        """What was sent still goes; the link closes when its tree is taken down (a close now
        would tell every region behind it that labels may be lost)."""
        self.retired = True

    def _keep(self, batches: list[saturn_pb2.LabelBatch]) -> None:
        now = time.monotonic()
        for batch in batches:
            if not self.kept or batch.seq > self.kept[-1][0]:
                self.kept.append((batch.seq, now, batch))
        while self.kept and now - self.kept[0][1] > RESEND_KEEP_S:
            self.trimmed_through = self.kept.popleft()[0]

    def _resume_after(self, last: int) -> None:
        """The receiver has everything up to ``last``: what was sent after it goes again first."""
        again = [batch for seq, _, batch in self.kept if seq > last]
        if last < self.trimmed_through:
            log.warning("%s → %s: the receiver lacks batches after %d, no longer kept: a gap goes first",
                        self.node, self.neighbour, last)  # fmt: skip
            gap = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_GAP, src=self.node)
            again.insert(0, saturn_pb2.LabelBatch(labels=[gap]))  # unnumbered: never dropped
        if again:
            self.line.put_back(again)

    async def run(self, stop: asyncio.Event) -> None:
        backoff = runtime.Backoff(self.tuning.link_retry_s)
        attempt = 0
        while not stop.is_set():
            self.endpoint = self.endpoints[attempt % len(self.endpoints)]
            try:
                await runtime.unless_stopped(stop, self._stream(stop))
                backoff.reset()
            except grpc.aio.AioRpcError as exc:
                if self.retired:
                    log.info("%s → %s: the tree of epoch %d is gone", self.node, self.neighbour, self.epoch)
                    return
                if self.connected.is_set():
                    backoff.reset()  # it had worked: retry fast (proxies fall back after 0.3 s)
                attempt += 1
                if len(self.endpoints) > 1 and attempt % len(self.endpoints):
                    delay = FAILOVER_S  # another replica first, at once
                else:
                    delay = backoff.next_delay()
                if not stop.is_set():
                    log.warning("%s → %s (%s): %s %s; retrying in %.2fs", self.node, self.neighbour,
                                self.endpoint, exc.code().name, exc.details(), delay)  # fmt: skip
                await runtime.sleep_or_stop(stop, delay)
            finally:
                self.connected.clear()

    async def _stream(self, stop: asyncio.Event) -> None:
        """One stream. Labels flow only once the receiver has accepted the hello (its initial
        metadata), so a refused link takes none; and a stream that ended hands back what its
        request generator took after the end (gRPC may leave that generator waiting on the
        line, where it would take a batch from the next stream and lose it)."""
        accepted = asyncio.Event()
        ended = False
        hello = saturn_pb2.Hello(node=self.node, epoch=self.epoch, resumable=self.resumable,
                                 incarnation=self.incarnation)  # fmt: skip

        async def messages():
            yield saturn_pb2.TreeMessage(hello=hello)
            await accepted.wait()
            if ended:
                return
            self.connected.set()
            log.info("%s → %s: connected (epoch %d)", self.node, self.neighbour, self.epoch)
            while not stop.is_set():
                due = await self.line.get_due()
                if ended:
                    self.line.put_back(due)
                    return
                self.sent_batches += 1
                if self.resumable:
                    self._keep(due)
                if len(due) == 1:
                    yield saturn_pb2.TreeMessage(batch=due[0])
                else:  # batches that piled up go as one, in order (numbered as the last)
                    labels = [x for b in due for x in b.labels]
                    yield saturn_pb2.TreeMessage(batch=saturn_pb2.LabelBatch(labels=labels, seq=due[-1].seq))

        async with grpc.aio.insecure_channel(self.endpoint, options=runtime.GRPC_OPTIONS) as channel:
            await channel.channel_ready()
            call = saturn_pb2_grpc.TreeNodeStub(channel).Deliver(messages(), metadata=auth.call_metadata())
            try:
                metadata = dict(tuple(await call.initial_metadata() or ()))
                if metadata.get(ACCEPTED) == "1":
                    if self.resumable:
                        self._resume_after(int(metadata.get(LAST_SEQ, "0")))
                    accepted.set()
                await call  # raises the stream's error (a refusal's too)
            finally:
                ended = True
                accepted.set()


class Positions:
    """Per resumable sender, its incarnation and the last batch number taken from it. A replica
    group keeps this in its replicated log, so that a backup taking over knows it too."""

    def __init__(self) -> None:
        self.by_sender: dict[str, tuple[str, int]] = {}

    def get(self, sender: str) -> tuple[str, int] | None:
        return self.by_sender.get(sender)

    def note(self, sender: str, incarnation: str, seq: int) -> None:
        self.by_sender[sender] = (incarnation, seq)


class TreeNodeServicer(saturn_pb2_grpc.TreeNodeServicer):
    """The receiving end of every link into a node: hands each batch, with its sender and the
    link's epoch, on. ``accepts`` says which senders may open a link (a serializer: its tree
    neighbours, at its epoch; a proxy: its parent in a tree it knows).

    A link ending, or opened again, may have lost labels: ``on_lost`` is told, except for a
    resumable sender (links.py's OutgoingLink), which resumes after the last batch this end
    reports; it is told only when the sender comes back as another incarnation (what the old
    one kept is gone). Batches a resumable sender sends again are dropped here."""

    def __init__(
        self, node: str, accepts: Accepts, on_batch: OnBatch, on_lost: OnLost | None = None,
        positions: Positions | None = None,
    ):  # fmt: skip
        self.node = node
        self.accepts = accepts
        self.on_batch = on_batch
        self.on_lost = on_lost  # told of a link from a neighbour that may have lost labels
        self.positions = positions or Positions()
        self.streams_opened: dict[tuple[str, int], int] = {}  # per (neighbour, epoch), since start
        self.duplicates = 0  # batches a resumable sender sent again, dropped

    async def Deliver(self, request_iterator, context: grpc.aio.ServicerContext):
        first = await anext(request_iterator, None)
        if first is None:
            return saturn_pb2.DeliverReply()
        if first.WhichOneof("kind") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be a hello")
        hello = first.hello
        sender, epoch = hello.node, hello.epoch
        refusal = await self.accepts(sender, epoch)
        if refusal is not None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, refusal)
        opened = self.streams_opened.get((sender, epoch), 0)
        self.streams_opened[sender, epoch] = opened + 1
        if hello.resumable:
            known = self.positions.get(sender)
            last = known[1] if known and known[0] == hello.incarnation else 0
            if known and known[0] != hello.incarnation:  # what the old incarnation kept is gone
                self.lost(sender, epoch)
            self.positions.note(sender, hello.incarnation, last)
            await context.send_initial_metadata(((ACCEPTED, "1"), (LAST_SEQ, str(last))))
        else:
            await context.send_initial_metadata(((ACCEPTED, "1"),))
            if opened:  # re-opened: whatever the old stream still carried may be gone
                self.lost(sender, epoch)
        log.info("%s ← %s: link open (epoch %d%s)", self.node, sender, epoch,
                 f", resuming after {last}" if hello.resumable else "")  # fmt: skip
        try:
            await self._consume(sender, epoch, hello, request_iterator, context)
        finally:
            log.info("%s ← %s: link closed (epoch %d)", self.node, sender, epoch)
            if not hello.resumable:
                self.lost(sender, epoch)
        return saturn_pb2.DeliverReply()

    async def _consume(
        self, sender: str, epoch: int, hello: saturn_pb2.Hello, request_iterator,
        context: grpc.aio.ServicerContext,
    ) -> None:  # fmt: skip
        async for message in request_iterator:
            if message.WhichOneof("kind") != "batch":
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "expected label batches after hello")
            for label in message.batch.labels:
                if label.type not in KNOWN_TYPES:
                    await context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT, f"label of unknown type {label.type} from {sender}"
                    )
            seq = message.batch.seq
            if hello.resumable and seq:
                known = self.positions.get(sender)
                if known and known[0] == hello.incarnation and seq <= known[1]:
                    self.duplicates += 1
                    continue
                self.positions.note(sender, hello.incarnation, seq)
            result = self.on_batch(sender, message.batch, epoch)
            if asyncio.iscoroutine(result):
                await result

    def lost(self, sender: str, epoch: int) -> None:
        if self.on_lost is not None:
            self.on_lost(sender, epoch)


def neighbours_at(node: str, topology: Topology) -> Accepts:
    """``accepts`` for a serializer: its tree neighbours, on its own tree's epoch."""
    neighbours = set(topology.tree_neighbours.get(node, ()))

    async def accepts(sender: str, epoch: int) -> str | None:
        if epoch != topology.epoch:
            return f"{node!r} serves the tree of epoch {topology.epoch}, not {epoch}"
        return not_a_neighbour(sender, node, neighbours)

    return accepts


def not_a_neighbour(sender: str, node: str, neighbours: set[str] | tuple[str, ...]) -> str | None:
    """Why ``sender`` may not open a link into ``node``, or None if it may."""
    if sender in neighbours:
        return None
    return f"{sender!r} is not a tree neighbour of {node!r} (neighbours: {sorted(neighbours)})"
