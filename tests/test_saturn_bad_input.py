"""Bad input to Saturn's own surfaces on causality-3region: the tree's links (the ``tree`` service
of the link transport, on the serializer and on a region's remote proxy, hosted by its bulk
receiver) and Attach at a saturn region. Each is refused with a clear reason, and afterwards the
system still delivers in causal order: the refused batches carry labels that would have wedged a
proxy had they been accepted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import CausalClient, InvalidLabel, Label, LabelType, StoreTimeout
from causal_client.proto import store_pb2, store_pb2_grpc
from services import plan
from services.labelpath.links import TREE
from services.launcher.cluster import Cluster
from services.proto import saturn_pb2
from services.transport.client import open_link
from services.transport.errors import LinkRefused

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

POLL_S = 0.001
TAKEN_S = 0.5  # a link the receiver has not ended this long after its messages: all taken


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    topology = load_topology("causality-3region.toml", protocol="saturn")
    with Cluster(topology, tmp_path_factory.mktemp("saturn-bad-input")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster) -> Iterator[CausalClient]:
    with CausalClient.connect(cluster.topology.client_address("a")) as client:
        yield client


def now_us(ahead_s: float = 0.0) -> int:
    return int((time.time() + ahead_s) * 1e6)


def poison() -> bytes:
    """An update label whose payload will never come: delivered, it would block its receiver's
    queue (everything behind it waits for that payload), so nothing from b would show up again."""
    return saturn_pb2.LabelBatch(
        labels=[
            saturn_pb2.TreeLabel(
                type=saturn_pb2.TREE_UPDATE, src="b/0", ts=now_us(), target="all/poison", group="all"
            )
        ]
    ).SerializeToString()


def hello(node: str) -> bytes:
    return saturn_pb2.Hello(node=node).SerializeToString()


def deliver(endpoint: str, hello_bytes: bytes, messages: list[bytes]) -> str:
    """Opens a tree link with ``hello_bytes``, sends ``messages``, then ends it: what the
    receiver said. "refused: <why>", the reason it ended the link, or "" if it took everything."""

    async def attempt() -> str:
        try:
            connection, _ = await open_link(endpoint, TREE, hello_bytes)
        except LinkRefused as exc:
            return f"refused: {str(exc).split(': ', 1)[1]}"
        connection.send_many(messages)
        try:
            return await asyncio.wait_for(asyncio.shield(connection.closed), TAKEN_S)
        except TimeoutError:
            connection.end()
            return ""

    return asyncio.run(attempt())


def tree_endpoints(cluster: Cluster) -> dict[str, str]:
    """Where each kind of tree node listens: the serializer, and region a's remote proxy."""
    t = cluster.topology
    return {"serializer": f"{t.host}:{t.serializer_port('s-b')}", "proxy": t.bulk_endpoint("a")}


NODES = ["serializer", "proxy"]


# -- tree links ----------------------------------------------------------------------------------
@pytest.mark.parametrize("node", NODES)
@pytest.mark.parametrize("first", [poison(), b"\xff\xff"], ids=["batch-as-hello", "garbage"])
def test_the_hello_must_be_a_hello(cluster, node, first):
    said = deliver(tree_endpoints(cluster)[node], first, [poison()])
    assert said in ("refused: a tree link's hello must be a Hello", "refused: '' is not a tree neighbour "
                    + {"serializer": "of 's-b' (neighbours: ['a', 'b', 'c'])", "proxy": "of 'a' (neighbours: "
                       "['s-b'])"}[node])  # fmt: skip


@pytest.mark.parametrize(
    ("node", "stranger", "own", "neighbours"),
    [
        ("serializer", "intruder", "s-b", ["a", "b", "c"]),
        ("serializer", "s-b", "s-b", ["a", "b", "c"]),  # itself
        ("serializer", "", "s-b", ["a", "b", "c"]),
        ("proxy", "c", "a", ["s-b"]),  # a region, but not next to a in the tree
        ("proxy", "b", "a", ["s-b"]),
        ("proxy", "a", "a", ["s-b"]),
    ],
)
def test_hello_from_a_node_that_is_not_a_neighbour(cluster, node, stranger, own, neighbours):
    said = deliver(tree_endpoints(cluster)[node], hello(stranger), [poison()])
    assert said == f"refused: {stranger!r} is not a tree neighbour of {own!r} (neighbours: {neighbours})"


@pytest.mark.parametrize("node", NODES)
def test_a_message_that_is_not_a_label_batch_ends_the_link(cluster, node):
    neighbour = {"serializer": "c", "proxy": "s-b"}[node]
    said = deliver(tree_endpoints(cluster)[node], hello(neighbour), [b"\xff\xff\xff"])
    assert said == f"{neighbour} sent a message that is not a label batch"


@pytest.mark.parametrize("node", NODES)
def test_a_link_that_sends_nothing_is_taken_and_does_nothing(cluster, node):
    neighbour = {"serializer": "c", "proxy": "s-b"}[node]
    assert deliver(tree_endpoints(cluster)[node], hello(neighbour), []) == ""


def test_a_label_of_unknown_type_from_a_neighbour_ends_the_link(cluster):
    """A neighbour (here: someone saying hello as s-b) sends a label type the proto does not
    define: the link ends, saying why; nothing of the batch is taken, nothing crashes."""
    strange = saturn_pb2.LabelBatch(labels=[saturn_pb2.TreeLabel(type=7, src="b/0", ts=1)])
    said = deliver(cluster.topology.bulk_endpoint("a"), hello("s-b"), [strange.SerializeToString()])
    assert said == "label of unknown type 7 from s-b"


def proxies_in_tree_order(cluster: Cluster) -> bool:
    """Every region's proxy reports (health "proxy") that it applies in the tree's order."""
    return all(plan.proxy_in_tree_order(cluster.topology, region) for region in cluster.topology.region_names)


def test_the_tree_still_delivers_in_causal_order_after_bad_input(cluster, client):
    """Runs after the tests above (same module cluster), and sends the whole lot once more. A
    stream that says hello as a tree neighbour and ends may have cost labels, as far as the
    receiver can tell (links.py): its proxy falls back to timestamp order, safe, and returns to
    the tree's order once the tree has caught up."""
    endpoints = tree_endpoints(cluster)
    for endpoint in endpoints.values():
        assert deliver(endpoint, poison(), [poison()]).startswith("refused")
        assert deliver(endpoint, hello("intruder"), [poison()]).startswith("refused")
    eventually(lambda: proxies_in_tree_order(cluster), timeout=15)
    writer, relay, observer = client.session("a"), client.session("b"), client.session("c")
    for _ in range(8):
        x, y = unique("x"), unique("y")
        started = time.monotonic()
        writer.write("all", x, {"v": "question"})
        eventually(lambda x=x: relay.read("all", x), interval=POLL_S)
        relay.write("all", y, {"v": "answer"})
        eventually(lambda y=y: observer.read("all", y), interval=POLL_S)
        assert len(observer.read("all", x)) == 1, "y visible at c without x"
        assert time.monotonic() - started < 2.0
    # b's updates still reach a: no poison label is stuck at the head of a's queue
    row = unique("from-b")
    relay.write("all", row, {"v": "hi"})
    eventually(lambda: writer.read("all", row), timeout=2, interval=POLL_S)
    assert proxies_in_tree_order(cluster)


# -- Attach --------------------------------------------------------------------------------------
@pytest.fixture
def stub(cluster) -> Iterator[store_pb2_grpc.StoreStub]:
    with grpc.insecure_channel(cluster.topology.frontend_endpoint("a")) as channel:
        yield store_pb2_grpc.StoreStub(channel)


MIGRATION_TO_A = {"type": store_pb2.LABEL_MIGRATION, "target": "a"}
IMPOSSIBLE = [
    pytest.param("b/0", 3600, {}, "s in the future", id="update-hour-ahead"),
    pytest.param("b/0", 3600, MIGRATION_TO_A, "s in the future", id="migration-hour-ahead"),
    pytest.param("zz/0", 0, {}, "unknown source gear 'zz/0'", id="unknown-region"),
    pytest.param("zz/0", 0, MIGRATION_TO_A, "unknown source gear 'zz/0'", id="migration-unknown-region"),
    pytest.param("b/1", 0, {}, "unknown source gear 'b/1'", id="unknown-shard"),
    pytest.param("s-b/0", 0, {}, "unknown source gear 's-b/0'", id="serializer-as-gear"),
    pytest.param("b/sink", 0, {}, "unknown source gear 'b/sink'", id="heartbeat-source"),
]


@pytest.mark.parametrize(("src", "ahead_s", "extra", "reason"), IMPOSSIBLE)
def test_attach_refuses_impossible_labels(stub, src, ahead_s, extra, reason):
    label = store_pb2.Label(ts=now_us(ahead_s), src=src, **extra)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:
        stub.Attach(store_pb2.AttachRequest(label=label), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
    assert info.value.details().startswith("label: ") and reason in info.value.details()
    assert time.monotonic() - started < 1.0  # refused at once, not after waiting


def test_attach_refuses_impossible_labels_through_the_client(client):
    with pytest.raises(InvalidLabel, match="in the future"):
        client.session("c", label=Label(ts=now_us(3600), src="a/0"))
    with pytest.raises(InvalidLabel, match="unknown source gear 'zz/0'"):
        client.session("c", label=Label(ts=now_us(), src="zz/0", type=LabelType.MIGRATION, target="c"))


@pytest.mark.parametrize(
    "label",
    [
        pytest.param(lambda: Label(ts=now_us(30), src="b/0"), id="update"),
        pytest.param(
            lambda: Label(ts=now_us(30), src="b/0", type=LabelType.MIGRATION, target="a"), id="migration"
        ),
        # Made at a itself: a label made here says nothing of what its client saw elsewhere.
        pytest.param(lambda: Label(ts=now_us(30), src="a/0"), id="made-here"),
        pytest.param(
            lambda: Label(ts=now_us(30), src="a/0", type=LabelType.MIGRATION, target="b"),
            id="migration-made-here-for-elsewhere",
        ),
    ],
)
def test_attach_that_cannot_become_stable_times_out(client, label):
    """A valid label 30 s ahead: nothing reaches that time for 30 s, so the attach waits, and the
    caller's deadline ends it with DEADLINE_EXCEEDED (StoreTimeout)."""
    started = time.monotonic()
    with pytest.raises(StoreTimeout):
        client.session("a", label=label(), timeout=0.5)
    assert 0.45 <= time.monotonic() - started < 2.0
    # the region is not stuck: an attach with a label that is stable returns soon
    past = client.session("b").write("all", unique("stable"), {"v": "1"})
    started = time.monotonic()
    client.session("a", label=past, timeout=5)
    assert time.monotonic() - started < 1.0


def test_a_migration_label_made_for_here_by_here_returns_at_once(client):
    """Its client was attached here when it was made (the only fast path on the server)."""
    ticket = Label(ts=now_us(30), src="a/0", type=LabelType.MIGRATION, target="a")
    started = time.monotonic()
    client.session("a", label=ticket, timeout=5)
    assert time.monotonic() - started < 0.5
