"""A serializer (paper §5.3): a tree node that forwards each label to every neighbour except the
one it came from, in arrival order, but only into subtrees with an interested region: one that
replicates the label's group, or a migration's target. Heartbeats go everywhere."""

from __future__ import annotations

import asyncio
import logging

from services import runtime
from services.proto import saturn_pb2, saturn_pb2_grpc
from services.saturn.links import OutgoingLink, TreeNodeServicer
from services.topology import Topology

log = logging.getLogger("serializer")


class Router:
    """Which neighbours a label goes to, from the topology's tree and groups."""

    def __init__(self, topology: Topology, node: str):
        self.node = node
        self.neighbours = topology.tree_neighbours.get(node, ())
        self.behind = {n: topology.regions_behind[(node, n)] for n in self.neighbours}
        self.replicas = {g: set(members) for g, members in topology.group_members.items()}

    def wants(self, neighbour: str, label: saturn_pb2.TreeLabel) -> bool:
        behind = self.behind[neighbour]
        if label.type == saturn_pb2.TREE_UPDATE:
            return not behind.isdisjoint(self.replicas.get(label.group, ()))
        if label.type == saturn_pb2.TREE_MIGRATION:
            return label.target in behind
        return True  # heartbeats and gaps go everywhere

    def route(self, source: str, labels) -> dict[str, list[saturn_pb2.TreeLabel]]:
        out: dict[str, list[saturn_pb2.TreeLabel]] = {n: [] for n in self.neighbours if n != source}
        for label in labels:
            for neighbour, batch in out.items():
                if self.wants(neighbour, label):
                    batch.append(label)
        return out


async def serve(topology: Topology, name: str, index: int, stop: asyncio.Event) -> None:
    router = Router(topology, name)
    links = {n: OutgoingLink(topology, name, n) for n in router.neighbours}

    def forward(source: str, batch: saturn_pb2.LabelBatch) -> None:
        for neighbour, labels in router.route(source, batch.labels).items():
            links[neighbour].send(labels)

    def lost(source: str) -> None:
        """Labels from ``source`` may have been lost: every region beyond must learn it, in order
        behind what it got before (see links.py)."""
        log.warning("%s: the link from %s broke; a gap label goes to every other neighbour", name, source)
        gap = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_GAP, src=name)
        forward(source, saturn_pb2.LabelBatch(labels=[gap]))

    server, health = runtime.new_server(topology.serializer_port(name), topology.bind_host(name))
    servicer = TreeNodeServicer(name, router.neighbours, forward, on_lost=lost)
    saturn_pb2_grpc.add_TreeNodeServicer_to_server(servicer, server)
    await server.start()
    runtime.mark_serving(health)
    log.info(
        "serializer %s on %s, neighbours %s", name, topology.tree_endpoint(name), ", ".join(router.neighbours)
    )
    await asyncio.gather(*(link.run(stop) for link in links.values()))
    await server.stop(grace=1)


def main() -> None:
    runtime.service_main("serializer: forwards labels along the Saturn tree", serve, node_flag="--name")


if __name__ == "__main__":
    main()
