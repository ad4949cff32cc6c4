"""A serializer (paper §5.3): a tree node that forwards each label to every neighbour except the
one it came from, in arrival order, but only into subtrees with an interested region: one that
replicates the label's group, or a migration's target. Heartbeats go everywhere."""

from __future__ import annotations

import asyncio
import logging

from services import runtime
from services.labelpath.links import TREE, OutgoingLink, TreeEndpoint, neighbours_at
from services.labelpath.stages import Stage
from services.proto import saturn_pb2
from services.saturn.replicas import FOLLOW, ROLE, Replica
from services.topology import Topology
from services.transport.server import LinkServer

log = logging.getLogger("serializer")


class Router:
    """Which neighbours a label goes to, from the topology's tree and groups. The answer depends
    only on the label's type and group (or a migration's target), so it is worked out once per
    such key and kept: routing a batch is one dictionary lookup per label."""

    def __init__(self, topology: Topology, node: str):
        self.node = node
        self.neighbours = topology.tree_neighbours.get(node, ())
        self.behind = {n: topology.regions_behind[(node, n)] for n in self.neighbours}
        self.replicas = {g: set(members) for g, members in topology.group_members.items()}
        self._destinations: dict[tuple[int, str], frozenset[str]] = {}
        self._others = {n: [x for x in self.neighbours if x != n] for n in self.neighbours}

    def wants(self, neighbour: str, label: saturn_pb2.TreeLabel) -> bool:
        behind = self.behind[neighbour]
        if label.type == saturn_pb2.TREE_UPDATE:
            return any(not behind.isdisjoint(self.replicas.get(g, ())) for g in label.group.split())
        if label.type == saturn_pb2.TREE_MIGRATION:
            return label.target in behind
        if label.type == saturn_pb2.TREE_HEARTBEAT and label.target:  # to the regions it names
            return not behind.isdisjoint(label.target.split())
        return True  # gaps, epoch changes and heartbeats that name no region go everywhere

    def destinations(self, label: saturn_pb2.TreeLabel) -> frozenset[str]:
        kind = label.type
        if kind == saturn_pb2.TREE_UPDATE:
            key = (kind, label.group)
        elif kind == saturn_pb2.TREE_MIGRATION or kind == saturn_pb2.TREE_HEARTBEAT:
            key = (kind, label.target)
        else:
            key = (kind, "")  # gaps and epoch changes go everywhere
        found = self._destinations.get(key)
        if found is None:
            found = frozenset(n for n in self.neighbours if self.wants(n, label))
            self._destinations[key] = found
        return found

    def gap(self, source: str) -> saturn_pb2.TreeLabel:
        """The gap label for the link from ``source``: it names the regions behind that link, the
        only ones whose labels can be missing beyond it (a remote proxy waits to hear one of them
        again before it acts on it: proxy.py); "" (every region) for a node not a neighbour."""
        behind = self.behind.get(source)
        return saturn_pb2.TreeLabel(
            type=saturn_pb2.TREE_GAP, src=self.node, target=" ".join(sorted(behind)) if behind else ""
        )

    def route(self, source: str, batch: saturn_pb2.LabelBatch) -> dict[str, saturn_pb2.LabelBatch]:
        """Per neighbour (never back to ``source``), the labels it wants, in order. A neighbour
        that wants the whole batch gets the batch itself (no label is copied)."""
        others = self._others.get(source) or [n for n in self.neighbours if n != source]
        picks = [self.destinations(label) for label in batch.labels]
        first = picks[0] if picks else frozenset()
        if all(pick is first for pick in picks):  # one key's answer for all (the common case)
            return {n: batch for n in others if n in first}
        out: dict[str, saturn_pb2.LabelBatch] = {}
        for neighbour in others:
            wanted = [i for i, pick in enumerate(picks) if neighbour in pick]
            if len(wanted) == len(picks):
                out[neighbour] = batch
            elif wanted:
                labels = batch.labels
                out[neighbour] = saturn_pb2.LabelBatch(labels=[labels[i] for i in wanted])
        return out


async def serve(topology: Topology, name: str, index: int, stop: asyncio.Event) -> None:
    router = Router(topology, name)
    if topology.replicas(name) > 1:
        await serve_replica(topology, name, index, stop, router)
        return
    links = {n: OutgoingLink(topology, name, n) for n in router.neighbours}
    arrived = Stage(name, "in")

    def forward(
        source: str, batch: saturn_pb2.LabelBatch, epoch: int = topology.epoch, raw: bytes = b""
    ) -> None:
        """A neighbour that wants the whole batch gets the bytes it came as (nothing re-encoded)."""
        arrived.labels(batch.labels)
        for neighbour, part in router.route(source, batch).items():
            links[neighbour].send_batch(part, raw=raw if raw and part is batch else None)

    def lost(source: str, epoch: int) -> None:
        """Labels from ``source`` may have been lost: every region beyond must learn it, in order
        behind what it got before (see links.py)."""
        log.warning("%s: the link from %s broke; a gap label goes to every other neighbour", name, source)
        forward(source, saturn_pb2.LabelBatch(labels=[router.gap(source)]))

    server = LinkServer(f"serializer {name}", topology.bind_host(name), topology.serializer_port(name))
    server.add(TREE, TreeEndpoint(name, neighbours_at(name, topology), forward, on_lost=lost).serve)
    await server.start()
    log.info("serializer %s (epoch %d) on %s, neighbours %s", name, topology.epoch,
             topology.tree_endpoint(name), ", ".join(router.neighbours))  # fmt: skip
    await asyncio.gather(*(link.run(stop) for link in links.values()))
    await server.stop()


def main() -> None:
    runtime.service_main(
        "serializer: forwards labels along the Saturn tree", serve, node_flag="--name", fast_loop=True
    )


async def serve_replica(
    topology: Topology, name: str, index: int, stop: asyncio.Event, router: Router
) -> None:
    """Replica ``index`` of a serializer's group (replicas.py): takes labels and forwards them
    only while it is the primary."""
    links: dict[str, OutgoingLink] = {}
    running: list[asyncio.Task] = []
    arrived = Stage(name, "in")

    def forward(entry: saturn_pb2.LogEntry) -> None:
        arrived.labels(entry.batch.labels)
        for neighbour, part in router.route(entry.source, entry.batch).items():
            links[neighbour].send_batch(part, seq=entry.pos)

    def take_over() -> None:
        """Links numbered by the log, holding it as sent: each resends what its receiver lacks."""
        for neighbour in router.neighbours:
            links[neighbour] = OutgoingLink(
                topology, name, neighbour, resumable=True, incarnation=replica.log.log_id
            )
        held: dict[str, list[tuple[int, saturn_pb2.LabelBatch]]] = {n: [] for n in links}
        for entry in replica.log.entries:
            for neighbour, part in router.route(entry.source, entry.batch).items():
                held[neighbour].append((entry.pos, part))
        for neighbour, link in links.items():
            link.preload(held[neighbour])
            running.append(asyncio.create_task(link.run(stop)))
        log.info("%s#%d is the primary (log %s, position %d)", name, index, replica.log.log_id[:8],
                 replica.log.next_pos)  # fmt: skip

    replica = Replica(topology, name, index, forward, take_over)
    among_neighbours = neighbours_at(name, topology)

    async def accepts(sender: str, epoch: int) -> str | None:
        if not replica.primary:
            return f"{name}#{index} is a backup: labels go to the primary"
        return await among_neighbours(sender, epoch)

    def lost(source: str, epoch: int) -> None:
        log.warning("%s#%d: %s came back as another incarnation; a gap label follows", name, index, source)
        replica.append(source, saturn_pb2.LabelBatch(labels=[router.gap(source)]))

    server = LinkServer(
        f"serializer {name}#{index}", topology.bind_host(name), topology.serializer_port(name, index)
    )
    endpoint = TreeEndpoint(name, accepts, lambda source, batch, epoch, raw: replica.append(source, batch),
                            on_lost=lost, positions=replica.log.sources)  # fmt: skip
    server.add(TREE, endpoint.serve)
    server.add(ROLE, replica.role)
    server.add(FOLLOW, replica.follow_me)
    await server.start()
    log.info("serializer %s replica %d (epoch %d) on port %d", name, index, topology.epoch,
             topology.serializer_port(name, index))  # fmt: skip
    await replica.run(stop)
    await stop.wait()
    await asyncio.gather(*running)
    await server.stop()


if __name__ == "__main__":
    main()
