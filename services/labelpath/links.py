"""Directed FIFO links of the serializer tree, with WAN emulation.

A link u→v is one link-transport connection (services/transport) from u to v's ``tree`` service:
one connection, so one order. The sender holds batches in a :class:`DelayLine` for the link's
latency (WAN latency between the two sites plus the edge's artificial delay, paper §5.4), then
writes every batch that is due as one message (drained, never waiting for company). A direct
link (C3's, region to region) is the other way round: its receiver holds what arrived for the
latency (``TreeEndpoint``'s ``arrival_delay``), so that labels sent outlive their sender.

A connection is reliable while it lasts; labels are lost only when one ends (a process died with
labels in memory, or a connection with labels in flight). So the receiving end reports every
incoming connection that ends, and every connection from a neighbour after its first, as a
possible loss (``on_lost``): a serializer forwards a gap label, a remote proxy falls back to
timestamp order (paper §6.1). Waiting for silence instead would miss an outage shorter than the
silence.

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

from google.protobuf.message import DecodeError

from services import runtime
from services.labelpath.stages import Stage
from services.proto import saturn_pb2
from services.topology import Topology
from services.transport.client import open_link
from services.transport.connection import Connection
from services.transport.delayed import DelayedWrites
from services.transport.errors import LINK_FAILURES, LinkClosed
from services.tuning import SaturnTuning
from services.wan import AT_ONCE, DelayLine, Link

log = logging.getLogger("tree-link")

#: "0" sends heartbeats without slack, to measure what it buys; see loadtest/bench.
HEARTBEAT_SLACK_ENV = "SATURN_HEARTBEAT_SLACK"
KNOWN_TYPES = frozenset(saturn_pb2.TreeLabelType.values())
TREE = "tree"  # the link-transport service of every tree node's port
RESEND_KEEP_S = 10.0  # a resumable link keeps what it sent this long, to resend after a failover
FAILOVER_S = 0.02  # a resumable link whose receiver failed tries the next replica after this
#: sender, batch, epoch, and the batch as it came (bytes a serializer may forward as they are)
OnBatch = Callable[[str, saturn_pb2.LabelBatch, int, bytes], None]
Outgoing = tuple[saturn_pb2.LabelBatch, bytes | None]  # a batch, and its bytes when they are known
OnLost = Callable[[str, int], None]  # sender, epoch
#: Whether a (sender, epoch) may open a link here: None if so, else why not.
Accepts = Callable[[str, int], Awaitable[str | None]]

_SLACK_ON = os.environ.get(HEARTBEAT_SLACK_ENV, "1") != "0"


def heartbeat_slack(labels, link: Link, tuning: SaturnTuning) -> float:
    """How much longer than the link's latency a batch may wait for company: heartbeats only
    need to arrive, and at seven regions they were most of an idle tree's messages (each costs a
    wake-up per hop). Up to ``heartbeat_slack_s`` per hop, and never past ``heartbeat_max_age_s``
    after the heartbeat was made, so that liveness (``tree_silence_s``) is unaffected (the
    topology's [saturn] table checks that they agree). Real labels: none."""
    if labels[0].type != saturn_pb2.TREE_HEARTBEAT or not _SLACK_ON:
        return 0.0  # (the common case, decided by the first label)
    if any(label.type != saturn_pb2.TREE_HEARTBEAT for label in labels):
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
        # A direct link's receiver serves its latency on arrival (TreeEndpoint's arrival_delay):
        # what this region sent outlives it, as bytes on a wire do. A tree link's sender holds
        # its batches for the latency (a serializer's own delay is part of the tree's design).
        link = AT_ONCE if direct else topology.wan_link(node, neighbour, tree=True)
        self.out: DelayedWrites[Outgoing] = DelayedWrites(link, self._encode)
        self.out_stage = Stage(node, f"out:{neighbour}")
        self.connected = asyncio.Event()
        self.sent_batches = 0  # messages written (batches that were due together go as one)

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        if labels:
            self.send_batch(saturn_pb2.LabelBatch(labels=labels))

    def send_batch(
        self, batch: saturn_pb2.LabelBatch, seq: int | None = None, raw: bytes | None = None
    ) -> None:
        """Sends a batch as it is (a serializer forwards what it received without copying it, and
        ``raw``, the bytes it came as, without encoding it again); on a resumable link numbered
        ``seq`` (a replica group's log position) or the next number."""
        if not batch.labels:
            return
        if self.resumable:
            batch, raw = self._numbered(batch, seq), None
        self.out.put((batch, raw), heartbeat_slack(batch.labels, self.out.line.link, self.tuning))

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

    def _encode(self, due: list[Outgoing]) -> list[bytes]:
        """Every batch that is due, as one message: serialized label batches concatenate into one
        (repeated labels in order; the last batch's number wins, "numbered as the last")."""
        self.sent_batches += 1
        for batch, _ in due:
            self.out_stage.labels(batch.labels)
        if self.resumable:
            self._keep([batch for batch, _ in due])
        return [b"".join(raw if raw is not None else batch.SerializeToString() for batch, raw in due)]

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
            self.out.put_back([(batch, None) for batch in again])

    async def run(self, stop: asyncio.Event) -> None:
        backoff = runtime.Backoff(self.tuning.link_retry_s)
        attempt = 0
        while not stop.is_set():
            self.endpoint = self.endpoints[attempt % len(self.endpoints)]
            try:
                await runtime.unless_stopped(stop, self._stream(stop))
                backoff.reset()
            except LINK_FAILURES as exc:
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
                    log.warning("%s → %s (%s): %s; retrying in %.2fs", self.node, self.neighbour,
                                self.endpoint, exc, delay)  # fmt: skip
                await runtime.sleep_or_stop(stop, delay)
            finally:
                self.connected.clear()

    async def _stream(self, stop: asyncio.Event) -> None:
        """One connection. Labels flow only once the receiver has accepted the hello, so a
        refused link takes none; it ends when the connection does (raising LinkClosed) or when
        the process stops. Batches are written as they fall due (DelayedWrites): what is due at
        one moment goes as one message."""
        hello = saturn_pb2.Hello(node=self.node, epoch=self.epoch, resumable=self.resumable,
                                 incarnation=self.incarnation)  # fmt: skip
        connection, answer = await open_link(
            self.endpoint, TREE, hello.SerializeToString(), server_name=self.neighbour
        )
        try:
            if self.resumable:
                self._resume_after(saturn_pb2.LinkAccepted.FromString(answer).last_seq)
            self.connected.set()
            log.info("%s → %s: connected (epoch %d)", self.node, self.neighbour, self.epoch)
            self.out.attach(connection)
            reason = await connection.wait_closed()
            raise LinkClosed(reason)
        finally:
            self.out.detach()  # what was not written yet waits for the next connection, in order
            connection.end()


class Positions:
    """Per resumable sender, its incarnation and the last batch number taken from it. A replica
    group keeps this in its replicated log, so that a backup taking over knows it too."""

    def __init__(self) -> None:
        self.by_sender: dict[str, tuple[str, int]] = {}

    def get(self, sender: str) -> tuple[str, int] | None:
        return self.by_sender.get(sender)

    def note(self, sender: str, incarnation: str, seq: int) -> None:
        self.by_sender[sender] = (incarnation, seq)


class TreeEndpoint:
    """The receiving end of every link into a node (its ``tree`` service): hands each batch, with
    its sender and the link's epoch, on. ``accepts`` says which senders may open a link (a
    serializer: its tree neighbours, at its epoch; a proxy: its parent in a tree it knows).

    A link ending, or opened again, may have lost labels: ``on_lost`` is told, except for a
    resumable sender (OutgoingLink), which resumes after the last batch this end reports; it is
    told only when the sender comes back as another incarnation (what the old one kept is gone).
    Batches a resumable sender sends again are dropped here. A batch that does not parse, or
    holds a label of an unknown type, ends its link (logged): nothing of it is handed on."""

    def __init__(
        self, node: str, accepts: Accepts, on_batch: OnBatch, on_lost: OnLost | None = None,
        positions: Positions | None = None, arrival_delay: Callable[[str], Link] | None = None,
    ):  # fmt: skip
        """``arrival_delay``: the link from a sender whose latency this end serves (C3's direct
        links: their senders write at once); batches and losses are handed on once it passed,
        in the order they came, over every connection from that sender (one line per sender)."""
        self.node = node
        self.accepts = accepts
        self.on_batch = on_batch
        self.on_lost = on_lost  # told of a link from a neighbour that may have lost labels
        self.positions = positions or Positions()
        self.streams_opened: dict[tuple[str, int], int] = {}  # per (neighbour, epoch), since start
        self.duplicates = 0  # batches a resumable sender sent again, dropped
        self.arrival_delay = arrival_delay
        # per (sender, epoch): what arrived, until its latency passed (None: a possible loss)
        self.arriving: dict[tuple[str, int], DelayLine[tuple[saturn_pb2.LabelBatch, bytes] | None]] = {}
        self.handing_on: set[asyncio.Task] = set()

    async def serve(self, connection: Connection, hello_bytes: bytes) -> None:
        """The link transport's handler of the ``tree`` service."""
        try:
            hello = saturn_pb2.Hello.FromString(hello_bytes)
        except DecodeError:
            connection.refuse("a tree link's hello must be a Hello")
            return
        sender, epoch = hello.node, hello.epoch
        refusal = await self.accepts(sender, epoch)
        if refusal is not None:
            connection.refuse(refusal)
            return
        opened = self.streams_opened.get((sender, epoch), 0)
        self.streams_opened[sender, epoch] = opened + 1
        last = 0
        if hello.resumable:
            known = self.positions.get(sender)
            last = known[1] if known and known[0] == hello.incarnation else 0
            if known and known[0] != hello.incarnation:  # what the old incarnation kept is gone
                self.lost(sender, epoch)
            self.positions.note(sender, hello.incarnation, last)
        elif opened:  # re-opened: whatever the old connection still carried may be gone
            self.lost(sender, epoch)
        connection.accept(saturn_pb2.LinkAccepted(last_seq=last).SerializeToString())
        log.info("%s ← %s: link open (epoch %d%s)", self.node, sender, epoch,
                 f", resuming after {last}" if hello.resumable else "")  # fmt: skip
        try:
            connection.deliver_to(lambda messages: self._take(sender, epoch, hello, messages, connection))
            await connection.wait_closed()
        finally:
            log.info("%s ← %s: link closed (epoch %d)", self.node, sender, epoch)
            if not hello.resumable:
                self.lost(sender, epoch)

    def _take(
        self, sender: str, epoch: int, hello: saturn_pb2.Hello, messages: list[bytes], connection: Connection
    ) -> None:
        """Batches as they are read, in order (synchronously: no task wakes up per batch)."""
        for body in messages:
            try:
                batch = saturn_pb2.LabelBatch.FromString(body)
            except DecodeError:
                connection.abort(f"{sender} sent a message that is not a label batch")
                return
            for label in batch.labels:
                if label.type not in KNOWN_TYPES:
                    connection.abort(f"label of unknown type {label.type} from {sender}")
                    return
            seq = batch.seq
            if hello.resumable and seq:
                known = self.positions.get(sender)
                if known and known[0] == hello.incarnation and seq <= known[1]:
                    self.duplicates += 1
                    continue
                self.positions.note(sender, hello.incarnation, seq)
            self._arrived(sender, epoch, (batch, body))

    def lost(self, sender: str, epoch: int) -> None:
        if self.on_lost is not None:
            self._arrived(sender, epoch, None)

    def _arrived(self, sender: str, epoch: int, item: tuple[saturn_pb2.LabelBatch, bytes] | None) -> None:
        if self.arrival_delay is None:
            self._hand_on(sender, epoch, item)
            return
        line = self.arriving.get((sender, epoch))
        if line is None:
            line = self.arriving[sender, epoch] = DelayLine(self.arrival_delay(sender))
            task = asyncio.ensure_future(self._hand_on_when_due(sender, epoch, line))
            self.handing_on.add(task)
            task.add_done_callback(self.handing_on.discard)
        line.put(item)

    async def _hand_on_when_due(
        self, sender: str, epoch: int, line: DelayLine[tuple[saturn_pb2.LabelBatch, bytes] | None]
    ) -> None:
        while True:
            for item in await line.get_due():
                self._hand_on(sender, epoch, item)

    def _hand_on(self, sender: str, epoch: int, item: tuple[saturn_pb2.LabelBatch, bytes] | None) -> None:
        if item is None:  # put only when there is an on_lost (lost())
            assert self.on_lost is not None
            self.on_lost(sender, epoch)
        else:
            self.on_batch(sender, item[0], epoch, item[1])


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
