"""Saturn's reason to exist, checked end to end (paper §4-§5): the causality anomaly of the
causality-3region topology, which `eventual` exhibits and `saturn` (and the baseline
`gentlerain`, by its stable time) must never show.

A→C is slow (100 ms), A→B and B→C are fast (5 ms), the only serializer sits beside B. A client in
A writes x; a client in B reads x and answers with y. Under `eventual`, y reaches C over the fast
path long before x: a reader in C sees the answer without the question. Under `saturn`, x's label
reaches C first (through the serializer), so y waits for x's payload: never a violation, and y is
still visible about when x's payload lands (~100 ms), not much later.

Every check is run under both protocols: the same test that passes under `saturn` must catch the
anomaly under `eventual`, otherwise it proves nothing.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import pytest
from helpers.causality import POLL_S, question_and_answer, visible, wait_visible
from helpers.clusters import bulk_stream_length
from helpers.deadlines import Deadline, scaled, wait_for
from helpers.topologies import TOPOLOGIES, load_topology
from helpers.waiting import play_until_caught, unique

from causal_client import CausalClient, Session
from services.launcher.cluster import Cluster
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

TOPOLOGY = "causality-3region.toml"
ROUNDS = 30
CHAIN_ROUNDS = 12
A_TO_C_S = 0.100  # the bulk latency of x from A to C in the topology file


CAUSAL = ["saturn", "gentlerain", "cure", "c3"]  # the protocols that must never show the anomaly


@pytest.fixture(scope="module", params=["eventual", *CAUSAL])
def cluster(request, tmp_path_factory) -> Iterator[Cluster]:
    """causality-3region under one protocol; tests are grouped per protocol (one cluster each)."""
    topology = load_topology(TOPOLOGY, protocol=request.param)
    with Cluster(topology, tmp_path_factory.mktemp(f"causality-{request.param}")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster) -> Iterator[CausalClient]:
    with CausalClient.connect(cluster.topology.client_address("a")) as client:
        yield client


def test_topology_has_the_anomaly_built_in():
    """The premise of every test below: the direct path A→C is much slower than A→B→C, both for
    the payloads and, under saturn, far slower than the labels' path through the serializer."""
    t = load_topology(TOPOLOGY)
    fast_path_ms = t.region_latency_ms("a", "b") + t.region_latency_ms("b", "c")
    assert t.region_latency_ms("a", "c") >= 10 * fast_path_ms
    assert t.tree_neighbours["s-b"] == ("a", "b", "c")
    assert t.tree_path_ms("a", "c") < t.region_latency_ms("a", "c") / 5


def test_answer_is_never_seen_before_the_question(cluster, client):
    protocol = cluster.topology.protocol
    writer, relay, observer = client.session("a"), client.session("b"), client.session("c")
    play_until_caught(  # (eventual: until caught, so that the test can fail)
        protocol, lambda: question_and_answer(writer, relay, observer)[0], "y seen in C without x", ROUNDS
    )


def test_answer_waits_for_the_question_but_not_much_longer(cluster, client):
    """Liveness and ordering in time under saturn: y becomes visible at C only once x's payload
    can have arrived (>= 100 ms after x, the A→C bulk latency) yet soon after (< 1 s, one
    outlier allowed on a loaded machine), not blocked behind anything else. Under eventual y
    shows up before x's payload could (the fast path): the lower bound tells them apart."""
    protocol = cluster.topology.protocol
    writer, relay, observer = client.session("a"), client.session("b"), client.session("c")
    question_and_answer(writer, relay, observer)  # warm-up: connections, first scripts
    delays = [question_and_answer(writer, relay, observer)[1] for _ in range(10)]
    if protocol != "eventual":
        assert min(delays) >= A_TO_C_S * 0.95, f"y visible at C before x could be: {delays}"
        late = [d for d in delays if d >= 1.0]
        assert len(late) <= 1, f"y held back far longer than x's payload needs: {delays}"
        assert statistics.median(delays) < 0.5, delays
    else:
        assert min(delays) < A_TO_C_S, f"eventual never showed y before x's payload: {delays}"


# -- a reply chain over several keys and shards -------------------------------------------------
def row_on_shard(topology: Topology, shard: int, prefix: str) -> str:
    """A fresh row key of group "all" that lives on ``shard`` (every region has the same shards)."""
    while True:
        row = unique(prefix)
        if topology.shard_of("a", "all", row) == shard:
            return row


def sharded(protocol: str) -> dict:
    """causality-3region with two shards (two gears) per region: the label sink merges two
    streams and the remote proxy applies across shards, the paths one shard never takes."""
    data = Topology.load(TOPOLOGIES / TOPOLOGY).model_dump()
    data["regions"] = [{**region, "shards": 2} for region in data["regions"]]
    data["protocol"] = protocol
    return data


def reply_chain(topology: Topology, alice: Session, bob: Session, observer: Session) -> list[list[bool]]:
    """Alice (A) posts w1; Bob (B) reads it and replies w2; Alice reads the reply and answers w3.
    Consecutive writes land on different shards. From before w1 until w3 is visible, an observer
    in C keeps reading w3, w2, w1 in that order (visibility only grows, so a later write seen
    first must have its past visible on the reads that follow). Returns every observation."""
    w1, w2, w3 = (row_on_shard(topology, shard, f"chain{i}") for i, shard in ((1, 0), (2, 1), (3, 0)))
    observations: list[list[bool]] = []
    done = threading.Event()
    deadline = Deadline(10, "w3 visible at c")

    def observe() -> None:
        while not deadline.expired():
            seen = [visible(observer, row) for row in (w3, w2, w1)][::-1]  # [w1, w2, w3]
            observations.append(seen)
            if seen[2]:
                deadline.met()
                done.set()
                return
            time.sleep(POLL_S)

    watcher = threading.Thread(target=observe, daemon=True)
    watcher.start()
    alice.write("all", w1, {"text": "post"})
    wait_visible(bob, w1)
    bob.write("all", w2, {"text": "reply", "to": w1})
    wait_visible(alice, w2)
    alice.write("all", w3, {"text": "reply to the reply", "to": w2})
    watcher.join(deadline.left() + scaled(5))
    if not done.is_set():
        raise deadline.fail(f"last seen {observations[-1:]}")
    return observations


def causally_closed(seen: list[bool]) -> bool:
    """A write visible implies every write before it in the chain visible."""
    return all(seen[i] for k in range(len(seen)) if seen[k] for i in range(k))


@pytest.mark.parametrize("protocol", ["eventual", *CAUSAL])
def test_reply_chain_across_regions_and_shards(launch, protocol):
    cluster = launch(sharded(protocol))
    topology = cluster.topology
    assert all(topology.region(r).shards == 2 for r in topology.region_names)
    with CausalClient.connect(topology.client_address("a")) as client:
        alice, bob, observer = client.session("a"), client.session("b"), client.session("c")

        def broken() -> bool:
            observations = reply_chain(topology, alice, bob, observer)
            return any(not causally_closed(seen) for seen in observations)

        play_until_caught(protocol, broken, "a reply chain seen in causal order at C", CHAIN_ROUNDS)


# -- a slow shard under eventual: no cascade -----------------------------------------------------
def test_a_paused_shard_holds_back_only_its_own_part_under_eventual(launch):
    """Occult's "no slowdown cascades", where nothing orders the shards: b's shard 0 is stopped
    (SIGSTOP) while a writes rows on both shards; b's shard 1 shows its rows within a second
    (each shard takes its part of the stream in its own lane, services/protocols/eventual.py),
    and shard 0's come once it runs again, none lost. Before the lanes, every batch of every
    origin gear waited on every shard, so shard 1 showed nothing until shard 0 was let go."""
    import os
    import signal

    cluster = launch(sharded("eventual"))
    topology = cluster.topology
    master = cluster.processes["b.redis0"].popen.pid
    with CausalClient.connect(topology.client_address("a")) as client:
        writer, reader = client.session("a"), client.session("b")
        warm = row_on_shard(topology, 1, "warm")
        writer.write("all", warm, {"v": "1"})
        wait_visible(reader, warm)
        os.kill(master, signal.SIGSTOP)
        try:
            held = [row_on_shard(topology, 0, "held") for _ in range(3)]
            free = [row_on_shard(topology, 1, "free") for _ in range(3)]
            for a, b in zip(held, free, strict=True):  # one origin gear's stream each, interleaved
                writer.write("all", a, {"v": "1"})
                writer.write("all", b, {"v": "1"})
            wait_for(
                lambda: all(visible(reader, row) for row in free),
                3.0,
                "b's running shard showing its rows while the other is stopped",
                interval=POLL_S,
            )
        finally:
            os.kill(master, signal.SIGCONT)
        for row in held:
            wait_visible(reader, row)

    # ... and a's streams are trimmed to their ends: the batch that let the stopped lane go was
    # acknowledged only as far as every shard had applied, so, with nothing more written (no
    # heartbeats under eventual), the receiver says later how far they got
    # (services/bulk/receiver.py); before that, a's streams kept their tails for good.
    def untrimmed() -> int:
        return sum(bulk_stream_length(cluster, "a", shard) for shard in range(2))

    trimmed = Deadline(10.0, "a's streams trimmed to their ends")
    while left := untrimmed():
        if trimmed.expired():
            raise trimmed.fail(f"they still hold {left} applied entries")
        time.sleep(POLL_S)
    trimmed.met()
