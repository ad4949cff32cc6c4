"""A serializer as a replica group (services/saturn/replicas.py): killing a replica mid-stream
(SIGKILL, the primary included) keeps labels flowing in the tree's order. No region falls back to
timestamp order, no update is lost or applied twice, causality holds."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from helpers.clusters import applied_count, metric_sum
from helpers.deadlines import scaled
from helpers.topologies import TOPOLOGIES
from helpers.waiting import eventually
from test_saturn_faults import Writer, causal_rounds, proxy_mode

from services import plan
from services.proto import saturn_pb2
from services.saturn.replicas import role_of
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def replicated(replicas: int = 2) -> dict:
    data = Topology.load(TOPOLOGIES / "causality-3region.toml").model_dump()
    data["serializers"][0]["replicas"] = replicas
    return data


class ModeWatch:
    """Samples b's and c's proxy mode every 50 ms: any 0 is a fall back to timestamp order."""

    def __init__(self, cluster):
        self.cluster, self.samples, self.stopping = cluster, [], False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stopping:
            self.samples.append(min(proxy_mode(self.cluster, r) for r in "bc"))
            time.sleep(0.05)

    def stop(self) -> list[float]:
        self.stopping = True
        self.thread.join(scaled(5))
        return self.samples


def test_killing_each_replica_mid_stream_loses_nothing_and_keeps_tree_order(launch, client_for):
    cluster = launch(replicated())
    assert {"serializer.s-b", "serializer.s-b.r1"} <= set(cluster.processes)
    client = client_for(cluster)
    reader = client.session("c")
    before = metric_sum(cluster, "c", "causal_remote_updates_applied_total", region="c", origin="a")
    writer = Writer(client, 4000).start()
    watch = ModeWatch(cluster)
    for victim, at in (("serializer.s-b", 300), ("serializer.s-b.r1", 1500)):  # one is the primary
        eventually(lambda at=at: writer.done >= at, timeout=60)
        cluster.kill(victim)
        assert writer.done < writer.n, "the kill must land in the middle of the stream"
        time.sleep(0.5)  # down a while (a fixed time): the stream goes on meanwhile
        cluster.restart(victim)
        eventually(lambda victim=victim: follows(cluster, victim), timeout=10, what=f"{victim} following")
    writer.thread.join(scaled(120))
    eventually(lambda: len(reader.read("all", writer.row)) == writer.n, timeout=60)
    row = reader.read("all", writer.row)
    assert [c.column for c in row] == [f"u{i:05d}" for i in range(writer.n)]
    eventually(lambda: reader.read("all", writer.row + ":n").counter("count") >= writer.n, timeout=30)
    assert reader.read("all", writer.row + ":n").counter("count") == writer.n
    applied = applied_count(cluster, "c", "a", at_least=2 * writer.n, before=before)
    assert applied == 2 * writer.n, "every update applied exactly once at c"
    samples = watch.stop()
    assert samples and min(samples) == 1, "a region fell back to timestamp order"
    assert causal_rounds(client, 3)[0] == 0


def test_causal_chains_hold_across_a_primary_kill(launch, client_for):
    """x in a, read in b, answered by y in b: c never shows y without x while replicas die."""
    cluster = launch(replicated(3))
    client = client_for(cluster)
    violations = 0
    for victim in ("serializer.s-b", "serializer.s-b.r1", "serializer.s-b.r2"):
        cluster.kill(victim)
        found, _ = causal_rounds(client, 4)
        violations += found
        cluster.restart(victim)
    assert violations == 0
    assert min(proxy_mode(cluster, r) for r in "abc") == 1


def roles(cluster) -> dict[str, saturn_pb2.RoleReply | None]:
    """What each replica of s-b says it is (None: it does not answer)."""
    host = cluster.topology.node_host("s-b")
    specs = [s for s in plan.serializers(cluster.topology, cluster.layout) if s.node == "s-b"]
    return {s.name: asyncio.run(role_of(f"{host}:{s.port}", timeout_s=2)) for s in specs}


def primaries(cluster) -> list[str]:
    """The replicas of s-b that say they are primary."""
    return sorted(name for name, reply in roles(cluster).items() if reply is not None and reply.primary)


def follows(cluster, name: str) -> bool:
    """Whether replica ``name`` is a backup that holds the group's log (it follows the primary)."""
    reply = roles(cluster)[name]
    return reply is not None and reply.holds_log and not reply.primary


def test_a_dead_primary_is_replaced_by_exactly_one_backup(launch):
    """Three replicas: when the primary dies, both backups see its stream end; one leads, the
    other follows it (each taking over made two primaries, and the regions took labels from
    both). A restarted replica follows too."""
    cluster = launch(replicated(3))
    eventually(lambda: len(primaries(cluster)) == 1, timeout=10)
    for _ in range(2):
        (primary,) = primaries(cluster)
        cluster.kill(primary)
        eventually(lambda primary=primary: primaries(cluster) not in ([], [primary]), timeout=10)
        for _ in range(10):  # and it stays one (a window of a fixed second)
            assert len(primaries(cluster)) == 1, primaries(cluster)
            time.sleep(0.1)
        cluster.restart(primary)
        eventually(lambda primary=primary: follows(cluster, primary), timeout=10, what=f"{primary} following")
        assert len(primaries(cluster)) == 1 and primary not in primaries(cluster)
