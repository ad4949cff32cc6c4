"""Exactly-once where it can break: a receiver killed while it holds payloads it has received but
not applied. Bulk transfer trims a sender's stream below what every destination acknowledged;
a receiver that acknowledged what it *received* (instead of what it *applied*) would let the
sender forget payloads that only its memory held, and a crash then loses them for good.

Three regions (causality-3region: a at A, b at B, c at C, the serializer beside b). A and C are
cut off from each other. a writes x; b reads x and writes N updates y, each of which therefore
depends on x; c receives the y (B→C is up) but may not show them before x, which cannot cross
the partition: c holds them (GentleRain: its stable time waits for a; Cure and C3: the y name
x's origin in their vectors; Saturn: x's label came through the tree and the y wait behind it
for x's payload). Meanwhile b's sender's trimmer runs. c's receiver is then SIGKILLed (the
supervisor starts it again), the partition heals, and c must show x and every y, each applied
once.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
from helpers.clusters import applied_count, metric_sum
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique
from helpers.wan_faults import partition

from causal_client import CausalClient, Mutation
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

N = 20
HELD_S = 2.5  # how long c holds the y before the kill: the sender's trimmer runs every second
# (a fixed hold: a trimmer's passes show nowhere, in no metric or log, to be waited for)
PARTITION_S = 9.0  # A and C cut off this long (messages sent meanwhile are held until it ends)


@pytest.mark.parametrize("protocol", ["gentlerain", "cure", "c3", "saturn"])
def test_a_receiver_killed_while_it_holds_payloads_loses_none_and_doubles_none(tmp_path, protocol):
    topology = load_topology("causality-3region.toml", protocol=protocol)
    with (
        Cluster(topology, tmp_path / "run", wan_control=True) as cluster,
        CausalClient.connect(topology.client_address("b")) as client,
    ):
        heals_at = partition(cluster, ("A", "C"), PARTITION_S)
        at_a, at_b = client.session("a", auto_migrate=False), client.session("b", auto_migrate=False)
        at_c = client.session("c", auto_migrate=False)
        x, count = unique("x"), unique("count")
        ys = [unique("y") for _ in range(N)]
        at_a.write("all", x, {"v": "x"})
        eventually(lambda: len(at_b.read("all", x)) == 1, timeout=10)  # b's session now depends on x
        for y in ys:
            at_b.batch([Mutation("all", y).set("v", "after x"), Mutation("all", count).increment("n")])
        eventually(lambda: metric_sum(cluster, "c", "causal_bulk_payloads_received_total", origin="b") >= N)
        time.sleep(HELD_S)
        assert not any(len(at_c.read("all", y)) for y in ys), "c showed a y before x: nothing was held"
        assert metric_sum(cluster, "c", "causal_remote_updates_applied_total", origin="b") == 0

        receiver = cluster.processes["c.bulk-receiver"].popen
        os.kill(receiver.pid, signal.SIGKILL)  # from outside, as a crash: the supervisor restarts it
        assert time.time() < heals_at - 1, "the partition ended before the kill: the test proves nothing"
        eventually(lambda: cluster.processes["c.bulk-receiver"].popen.pid != receiver.pid, timeout=15)

        def all_there() -> bool:
            return len(at_c.read("all", x)) == 1 and all(len(at_c.read("all", y)) == 1 for y in ys)

        eventually(all_there, timeout=PARTITION_S + 30)
        assert at_c.read("all", count).counter("n") == N
        assert at_b.read("all", count).counter("n") == N
        applied = applied_count(cluster, "c", "b", at_least=N)
        assert applied == N, f"c applied {applied:g} updates of b's {N}"
