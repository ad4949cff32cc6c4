"""A serializer's routing (paper §5.3) on demo-3region-partial's tree (virginia — s-us — s-eu,
whose other neighbours are ireland and frankfurt): a label goes only into subtrees with a region
that wants it, never back where it came from, in order; a batch every neighbour wants whole is
forwarded as it is, without copying its labels."""

from __future__ import annotations

from helpers.topologies import load_topology

from services.proto import saturn_pb2
from services.saturn.serializer import Router

ROUTER = Router(load_topology("demo-3region-partial.toml"), "s-eu")


def update(group: str, ts: int) -> saturn_pb2.TreeLabel:
    kind = saturn_pb2.TREE_UPDATE
    return saturn_pb2.TreeLabel(type=kind, src="s/0", ts=ts, target=f"{group}/r", group=group)


def routed(source: str, *labels: saturn_pb2.TreeLabel) -> dict[str, list[int]]:
    out = ROUTER.route(source, saturn_pb2.LabelBatch(labels=list(labels)))
    return {neighbour: [label.ts for label in batch.labels] for neighbour, batch in out.items()}


def test_labels_go_only_where_their_group_is_replicated_and_never_back():
    assert routed("s-us", update("all", 1), update("europe", 2), update("eu-central", 3)) == {
        "ireland": [1, 2],
        "frankfurt": [1, 2, 3],
    }
    assert routed("ireland", update("atlantic", 4), update("us-only", 5), update("europe", 6)) == {
        "s-us": [4, 5],
        "frankfurt": [6],
    }


def test_migrations_go_to_their_target_and_heartbeats_everywhere():
    migration = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_MIGRATION, src="v/0", ts=7, target="frankfurt")
    heartbeat = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_HEARTBEAT, src="v/sink", ts=8)
    assert routed("s-us", migration, heartbeat) == {"ireland": [8], "frankfurt": [7, 8]}


def test_a_heartbeat_that_names_regions_goes_only_towards_them():
    def beat(ts: int, target: str) -> saturn_pb2.TreeLabel:
        return saturn_pb2.TreeLabel(type=saturn_pb2.TREE_HEARTBEAT, src="v/sink", ts=ts, target=target)

    assert routed("s-us", beat(1, "frankfurt")) == {"frankfurt": [1]}
    assert routed("s-us", beat(2, "ireland frankfurt")) == {"ireland": [2], "frankfurt": [2]}
    assert routed("ireland", beat(3, "virginia")) == {"s-us": [3]}
    assert routed("ireland", beat(4, "virginia"), beat(5, "")) == {"s-us": [4, 5], "frankfurt": [5]}


def test_a_batch_wanted_whole_is_forwarded_as_it_is():
    batch = saturn_pb2.LabelBatch(labels=[update("all", 9), update("all", 10)])
    out = ROUTER.route("s-us", batch)
    assert set(out) == {"ireland", "frankfurt"} and all(part is batch for part in out.values())
    assert ROUTER.route("s-us", saturn_pb2.LabelBatch()) == {}
