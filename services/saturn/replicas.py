"""A serializer as a replica group at its site (paper §6.1: "serializers are made resilient to
failures by replicating them"), so that a replica's death does not send the regions behind it to
timestamp order.

Primary-backup with a replicated log. Every link into the group goes to its primary (a backup
refuses it); the primary appends each batch it takes to its log, in arrival order (the one
serialization the group makes), sends the entry to every backup, and forwards entries to its
neighbours, in log order, once every backup holds them. A forwarded batch carries its log
position as its number on a resumable link (links.py), and every link into the group is
resumable too: the log records, per source, the last number it took. When the primary dies, a
backup (its Follow stream ends) becomes primary with the log it holds: the sources reconnect and
resume after what the log has from them, and its neighbours' links resume after what each
receiver reports having; entries the old primary never forwarded go now. Nothing is lost, nothing
is applied twice (receivers drop numbers they have), and the order is the log's.

A replica that starts looks for a primary among the others and follows it (from the current
position: it needs no history, only what comes after, to take over); if none is primary and no
replica with a lower index answers, it becomes primary. Fail-stop, as the paper assumes: a replica
is dead when its connections are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import deque
from collections.abc import Callable

import grpc

from services import auth, runtime
from services.proto import saturn_pb2, saturn_pb2_grpc
from services.saturn.links import Positions
from services.topology import Topology

log = logging.getLogger("replica")

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


class Follower:
    """A backup, as its primary sees it."""

    def __init__(self, replica: int, acked: int) -> None:
        self.replica = replica
        self.acked = acked
        self.queue: asyncio.Queue[saturn_pb2.LogEntry] = asyncio.Queue()


Forward = Callable[[saturn_pb2.LogEntry], None]


class Replica(saturn_pb2_grpc.ReplicaGroupServicer):
    """One replica of a serializer's group: its role, its log, its backups (as primary)."""

    def __init__(
        self, topology: Topology, name: str, index: int, forward: Forward, take_over: Callable[[], None]
    ):
        self.name, self.index = name, index
        self.peers = {r: f"{topology.node_host(name)}:{topology.serializer_port(name, r)}"
                      for r in range(topology.replicas(name)) if r != index}  # fmt: skip
        self.log = ReplicaLog()
        self.primary = False
        self.followers: set[Follower] = set()
        self.unforwarded: deque[saturn_pb2.LogEntry] = deque()  # in log order (as primary)
        self.forward = forward  # an entry to the neighbours (the serializer's routing)
        self.take_over = take_over  # told once this replica becomes primary

    # -- as primary --------------------------------------------------------------------------
    def append(self, source: str, batch: saturn_pb2.LabelBatch) -> None:
        """A batch a neighbour sent (the log's sources already hold its number: links.py)."""
        entry = self.log.append(source, batch)
        self.unforwarded.append(entry)
        for follower in self.followers:
            follower.queue.put_nowait(entry)
        self.forward_held()

    def forward_held(self) -> None:
        """Forwards, in log order, every entry every backup holds."""
        held = min((f.acked for f in self.followers), default=self.log.next_pos - 1)
        while self.unforwarded and self.unforwarded[0].pos <= held:
            self.forward(self.unforwarded.popleft())

    async def Role(self, request, context):
        return saturn_pb2.RoleReply(primary=self.primary)

    async def Follow(self, request_iterator, context: grpc.aio.ServicerContext):
        if not self.primary:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{self.name}#{self.index} is a backup")
        first = await anext(request_iterator, None)
        if first is None:
            return
        follower = Follower(first.replica, self.log.next_pos - 1)
        yield saturn_pb2.LogMessage(start=self.log.start())
        self.followers.add(follower)
        log.info("%s#%d: replica %d follows from position %d", self.name, self.index, follower.replica,
                 follower.acked + 1)  # fmt: skip

        async def acks() -> None:
            async for request in request_iterator:
                follower.acked = max(follower.acked, request.acked)
                self.forward_held()

        reader = asyncio.create_task(acks())
        try:
            while not reader.done():
                getter = asyncio.ensure_future(follower.queue.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield saturn_pb2.LogMessage(entry=getter.result())
                else:
                    getter.cancel()
        finally:
            reader.cancel()
            self.followers.discard(follower)
            log.warning("%s#%d: replica %d no longer follows", self.name, self.index, follower.replica)
            self.forward_held()  # what waited for it goes now

    # -- role ----------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Finds its role, follows a primary until it is gone, then is the primary."""
        while not stop.is_set() and not self.primary:
            primary = await self.find_primary()
            if primary is not None:
                await runtime.unless_stopped(stop, self.follow(primary))
                if not stop.is_set():
                    log.warning("%s#%d: the primary (replica %d) is gone: taking over at position %d",
                                self.name, self.index, primary, self.log.next_pos)  # fmt: skip
                    self.become_primary()
            elif await self.lowest_alive():
                self.become_primary()
            else:
                await runtime.sleep_or_stop(stop, ROLE_RETRY_S)

    def become_primary(self) -> None:
        """The log as it is counts as forwarded: ``take_over`` hands it to the links, which
        resend what each receiver lacks (the old primary may have forwarded any of it)."""
        self.primary = True
        self.take_over()

    async def ask_role(self, replica: int) -> bool | None:
        """Whether ``replica`` is primary (None: it does not answer)."""
        try:
            peer = self.peers[replica]
            async with grpc.aio.insecure_channel(peer, options=runtime.GRPC_OPTIONS) as channel:
                stub = saturn_pb2_grpc.ReplicaGroupStub(channel)
                request = saturn_pb2.RoleRequest()
                reply = await stub.Role(request, timeout=ROLE_TIMEOUT_S, metadata=auth.call_metadata())
                return reply.primary
        except grpc.aio.AioRpcError:
            return None

    async def find_primary(self) -> int | None:
        for replica in sorted(self.peers):
            if await self.ask_role(replica):
                return replica
        return None

    async def lowest_alive(self) -> bool:
        """No replica with a lower index answers: this one may lead."""
        for replica in sorted(r for r in self.peers if r < self.index):
            if await self.ask_role(replica) is not None:
                return False
        return True

    async def follow(self, primary: int) -> None:
        acked: asyncio.Queue[int] = asyncio.Queue()

        async def requests():
            yield saturn_pb2.FollowRequest(replica=self.index, acked=0)
            while True:
                yield saturn_pb2.FollowRequest(replica=self.index, acked=await acked.get())

        with contextlib.suppress(grpc.aio.AioRpcError):
            peer = self.peers[primary]
            async with grpc.aio.insecure_channel(peer, options=runtime.GRPC_OPTIONS) as channel:
                stub = saturn_pb2_grpc.ReplicaGroupStub(channel)
                async for message in stub.Follow(requests(), metadata=auth.call_metadata()):
                    if message.WhichOneof("kind") == "start":
                        self.log.join(message.start)
                        log.info("%s#%d: following replica %d from position %d", self.name, self.index,
                                 primary, message.start.next_pos)  # fmt: skip
                    else:
                        self.log.adopt(message.entry)
                        acked.put_nowait(message.entry.pos)
