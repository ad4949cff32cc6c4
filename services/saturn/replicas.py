"""A serializer as a replica group at its site (paper §6.1: "serializers are made resilient to
failures by replicating them"), so that a replica's death does not send the regions behind it to
timestamp order.

Primary-backup with a replicated log. Every link into the group goes to its primary (a backup
refuses it); the primary appends each batch it takes to its log, in arrival order (the one
serialization the group makes), sends the entry to every backup, and forwards entries to its
neighbours, in log order, once every backup holds them. A forwarded batch carries its log
position as its number on a resumable link (links.py), and every link into the group is
resumable too: the log records, per source, the last number it took. When the primary dies, a
backup becomes primary with the log it holds: the sources reconnect and resume after what the
log has from them, and its neighbours' links resume after what each receiver reports having;
entries the old primary never forwarded go now. Nothing is lost, nothing is applied twice
(receivers drop numbers they have), and the order is the log's.

Which backup: the one that holds the longest log, the lowest index among equals, asked of every
replica that answers (``RoleReply``). Every backup whose Follow stream ends asks, so with two
backups exactly one leads and the other follows it (each taking over as its stream ended made
two primaries, and the regions took labels from both). Everything forwarded is held by every
backup, so the leader's log holds it; what only some held was never forwarded, and its sources
resend it. A replica that starts holds no log: it follows a primary (from the current position:
it needs no history, only what comes after, to take over), and leads only where no replica
holding a log answers (the group's first start, or all of it restarted). Fail-stop, as the paper
assumes: a replica is dead when its connections are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable

from google.protobuf.message import DecodeError

from services import runtime
from services.labelpath.links import Positions
from services.proto import saturn_pb2
from services.topology import Topology
from services.transport.client import open_link
from services.transport.connection import Connection
from services.transport.errors import LINK_FAILURES, LinkClosed

log = logging.getLogger("replica")

ROLE, FOLLOW = "role", "follow"  # the group's link-transport services, on each replica's port
LOG_KEEP = 50_000  # entries kept for a takeover's resends (links keep 10 s of what they sent)
ROLE_TIMEOUT_S = 0.5
ROLE_RETRY_S = 0.2


class ReplicaLog:
    """The group's order: entries with growing positions, and per source the last batch taken."""

    def __init__(self) -> None:
        self.log_id = uuid.uuid4().hex
        self.next_pos = 1
        self.entries: deque[saturn_pb2.LogEntry] = deque(maxlen=LOG_KEEP)
        self.sources = Positions()

    def append(self, source: str, batch: saturn_pb2.LabelBatch) -> saturn_pb2.LogEntry:
        incarnation, seq = self.sources.get(source) or ("", 0)
        entry = saturn_pb2.LogEntry(pos=self.next_pos, source=source, source_incarnation=incarnation,
                                    source_seq=seq if batch.seq else 0, batch=batch)  # fmt: skip
        self.next_pos += 1
        self.entries.append(entry)
        return entry

    def adopt(self, entry: saturn_pb2.LogEntry) -> None:
        """A backup's copy of the primary's entry."""
        self.entries.append(entry)
        self.next_pos = entry.pos + 1
        if entry.source_seq:
            self.sources.note(entry.source, entry.source_incarnation, entry.source_seq)

    def start(self) -> saturn_pb2.FollowStart:
        sources = [saturn_pb2.SourcePosition(source=s, incarnation=i, seq=q)
                   for s, (i, q) in self.sources.by_sender.items()]  # fmt: skip
        return saturn_pb2.FollowStart(log_id=self.log_id, next_pos=self.next_pos, sources=sources)

    def join(self, start: saturn_pb2.FollowStart) -> None:
        self.log_id, self.next_pos = start.log_id, start.next_pos
        self.entries.clear()
        for source in start.sources:
            self.sources.note(source.source, source.incarnation, source.seq)


async def role_of(
    endpoint: str, timeout_s: float = ROLE_TIMEOUT_S, server_name: str | None = None
) -> saturn_pb2.RoleReply | None:
    """What the replica at ``endpoint`` (of serializer ``server_name``) is: its group's primary
    or not, and the log it holds (None: it does not answer)."""
    try:
        connection, answer = await open_link(endpoint, ROLE, timeout_s=timeout_s, server_name=server_name)
    except LINK_FAILURES:
        return None
    connection.end()
    return saturn_pb2.RoleReply.FromString(answer)


class Follower:
    """A backup, as its primary sees it: what it holds, and its connection."""

    def __init__(self, replica: int, acked: int, connection: Connection) -> None:
        self.replica = replica
        self.acked = acked
        self.connection = connection


Forward = Callable[[saturn_pb2.LogEntry], None]


class Replica:
    """One replica of a serializer's group: its role, its log, its backups (as primary)."""

    def __init__(
        self, topology: Topology, name: str, index: int, forward: Forward, take_over: Callable[[], None]
    ):
        self.name, self.index = name, index
        self.peers = {r: f"{topology.node_host(name)}:{topology.serializer_port(name, r)}"
                      for r in range(topology.replicas(name)) if r != index}  # fmt: skip
        self.log = ReplicaLog()
        self.primary = False
        self.holds_log = False  # has followed or led: its log is the group's, not a fresh one
        self.followers: set[Follower] = set()
        self.unforwarded: deque[saturn_pb2.LogEntry] = deque()  # in log order (as primary)
        self.forward = forward  # an entry to the neighbours (the serializer's routing)
        self.take_over = take_over  # told once this replica becomes primary

    # -- as primary --------------------------------------------------------------------------
    def append(self, source: str, batch: saturn_pb2.LabelBatch) -> None:
        """A batch a neighbour sent (the log's sources already hold its number: links.py)."""
        entry = self.log.append(source, batch)
        self.unforwarded.append(entry)
        if self.followers:
            body = entry.SerializeToString()
            for follower in self.followers:
                with contextlib.suppress(LinkClosed):  # gone: follow_me lets go of it
                    follower.connection.send(body)
        self.forward_held()

    def forward_held(self) -> None:
        """Forwards, in log order, every entry every backup holds."""
        held = min((f.acked for f in self.followers), default=self.log.next_pos - 1)
        while self.unforwarded and self.unforwarded[0].pos <= held:
            self.forward(self.unforwarded.popleft())

    async def role(self, connection: Connection, hello: bytes) -> None:
        """The ``role`` service: whether this replica is the primary."""
        connection.accept(self.role_reply().SerializeToString())

    def role_reply(self) -> saturn_pb2.RoleReply:
        log_now = self.log.next_pos
        return saturn_pb2.RoleReply(primary=self.primary, next_pos=log_now, holds_log=self.holds_log)

    async def follow_me(self, connection: Connection, hello: bytes) -> None:
        """The ``follow`` service (as primary): the log from now on down, acknowledgements up."""
        if not self.primary:
            connection.refuse(f"{self.name}#{self.index} is a backup")
            return
        try:
            replica = saturn_pb2.FollowRequest.FromString(hello).replica
        except DecodeError:
            connection.refuse("a follow's hello must be a FollowRequest")
            return
        follower = Follower(replica, self.log.next_pos - 1, connection)
        connection.accept(self.log.start().SerializeToString())
        self.followers.add(follower)  # no wait since the start: it misses no entry
        log.info("%s#%d: replica %d follows from position %d", self.name, self.index, follower.replica,
                 follower.acked + 1)  # fmt: skip

        def acks(messages: list[bytes]) -> None:
            try:
                acked = max(saturn_pb2.FollowRequest.FromString(body).acked for body in messages)
            except DecodeError:
                connection.abort(f"replica {replica} sent a message that is not a FollowRequest")
                return
            follower.acked = max(follower.acked, acked)
            self.forward_held()

        try:
            connection.deliver_to(acks)
            await connection.wait_closed()
        finally:
            self.followers.discard(follower)
            log.warning("%s#%d: replica %d no longer follows", self.name, self.index, follower.replica)
            self.forward_held()  # what waited for it goes now

    # -- role ----------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Finds its role: follows a primary until it is gone, and asks again; leads once the
        replicas that answer agree it should (module doc)."""
        while not stop.is_set() and not self.primary:
            roles = await self.ask_roles()
            primary = next((r for r, reply in sorted(roles.items()) if reply.primary), None)
            if primary is not None:
                await runtime.unless_stopped(stop, self.follow(primary))
                if not stop.is_set():
                    log.warning("%s#%d: the primary (replica %d) is gone at position %d",
                                self.name, self.index, primary, self.log.next_pos)  # fmt: skip
            elif self.leads(roles):
                if self.holds_log:
                    log.warning("%s#%d: taking over at position %d", self.name, self.index, self.log.next_pos)
                self.become_primary()
            else:
                await runtime.sleep_or_stop(stop, ROLE_RETRY_S)

    def leads(self, roles: dict[int, saturn_pb2.RoleReply]) -> bool:
        """Whether this replica ranks first among those that answered: a log before none, the
        longer log first, the lower index among equals."""

        def rank(replica: int, reply: saturn_pb2.RoleReply) -> tuple[bool, int, int]:
            return reply.holds_log, reply.next_pos if reply.holds_log else 0, -replica

        mine = rank(self.index, self.role_reply())
        return all(rank(replica, reply) < mine for replica, reply in roles.items())

    def become_primary(self) -> None:
        """The log as it is counts as forwarded: ``take_over`` hands it to the links, which
        resend what each receiver lacks (the old primary may have forwarded any of it)."""
        self.primary = self.holds_log = True
        self.take_over()

    async def ask_roles(self) -> dict[int, saturn_pb2.RoleReply]:
        """What every other replica that answers says it is, asked all at once."""
        replies = await asyncio.gather(*(role_of(e, server_name=self.name) for e in self.peers.values()))
        answered = zip(self.peers, replies, strict=True)
        return {replica: reply for replica, reply in answered if reply is not None}

    async def follow(self, primary: int) -> None:
        """Holds the primary's log as it grows, acknowledging what it holds, until the primary
        is gone (its connection ends)."""
        hello = saturn_pb2.FollowRequest(replica=self.index, acked=0).SerializeToString()
        try:
            connection, answer = await open_link(self.peers[primary], FOLLOW, hello, server_name=self.name)
        except LINK_FAILURES:
            return
        try:
            start = saturn_pb2.FollowStart.FromString(answer)
            self.log.join(start)
            self.holds_log = True
            log.info("%s#%d: following replica %d from position %d", self.name, self.index,
                     primary, start.next_pos)  # fmt: skip

            def entries(messages: list[bytes]) -> None:
                for body in messages:
                    self.log.adopt(saturn_pb2.LogEntry.FromString(body))
                ack = saturn_pb2.FollowRequest(replica=self.index, acked=self.log.next_pos - 1)
                connection.send(ack.SerializeToString())

            connection.deliver_to(entries)
            await connection.wait_closed()
        finally:
            connection.end()
