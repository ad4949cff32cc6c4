"""C3 (docs/PROTOCOLS.md, "C3"): what sets it apart from Saturn's tree, end to end, and the
sender's rule that keeps its waits free of cycles. The causality tests every protocol must pass
(test_saturn_causality, test_saturn_migration, test_partial_transitive, test_transactions) and
the history checker run it too.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from helpers.clusters import Writer, metric_sum, region_processes
from helpers.deadlines import Deadline
from helpers.topologies import load_topology, with_groups
from helpers.waiting import eventually, expect_caught, unique
from helpers.wan_faults import partition

from causal_client import CausalClient
from services.c3.sender import DirectLabelSender
from services.launcher.cluster import Cluster
from services.proto import saturn_pb2

PARTITION_S = 3.0


def partial(protocol: str) -> dict:
    """causality-3region with "ac" at a and c only and "bc" at b and c only."""
    return with_groups("causality-3region.toml", {"ac": ["a", "c"], "bc": ["b", "c"], "all": ["*"]}, protocol)


def test_a_label_names_no_update_at_or_above_its_own_ts():
    """The vector is read after the label's write, so it may name updates applied since; capped
    just below the label's ts, every wait is for a smaller ts, and two regions' labels can never
    each wait for the other (without the cap, a third region would hold both forever)."""
    topology = load_topology(partial("c3"))
    huge = 10**18

    async def sent() -> list[saturn_pb2.TreeLabel]:
        async def persist() -> None:
            return None

        sender = DirectLabelSender(topology, "a", lambda: {"b": huge, "c": 7}, lambda ts: None, persist)
        update = saturn_pb2.TreeLabel(
            type=saturn_pb2.TREE_UPDATE, src="a/0", ts=1000, group="ac", target="ac/x"
        )
        sender.send([update])
        return [label for batch, _ in sender.links["c"].out.queued() for label in batch.labels]

    (label,) = asyncio.run(sent())
    assert dict(label.deps) == {"b": 999, "c": 7}


@pytest.mark.cluster
@pytest.mark.parametrize("protocol", ["saturn", "c3"])
def test_an_update_does_not_wait_for_an_independent_one_whose_payload_is_late(tmp_path, protocol):
    """C3's parallel execution. a and c are cut off from each other; a writes u (group ac), then b
    writes v (group bc), which cannot depend on u (b never has u). Under c3, c shows v at once;
    under saturn, u's label reached c through the tree ahead of v's, and v waits behind it until
    u's payload comes (the tree's single order: what C3's paper holds against Saturn)."""
    cluster = Cluster(load_topology(partial(protocol)), tmp_path / "run", wan_control=True)
    with cluster, CausalClient.connect(cluster.topology.client_address("a")) as client:
        at_a, at_b = client.session("a", auto_migrate=False), client.session("b", auto_migrate=False)
        reader = client.session("c", auto_migrate=False)
        u_row, v_row = unique("u"), unique("v")
        heals_at = partition(cluster, ("A", "C"), PARTITION_S)
        sent, arrived = u_label_on_its_way(cluster)
        at_a.write("ac", u_row, {"text": "u"})
        if protocol == "saturn":  # through the tree, around the partition: ahead of v's
            eventually(lambda: u_label_on_its_way(cluster)[1] > arrived, timeout=5, what="u's label at c")
        else:  # held by the partition
            eventually(lambda: u_label_on_its_way(cluster)[0] > sent, timeout=5, what="u's label sent by a")
        at_b.write("bc", v_row, {"text": "v"})
        shown = Deadline(1.0, "v at c during the partition")  # c3's (saturn's must not come)
        seen_v_at = None
        while time.time() < heals_at - 0.7:  # while the partition lasts (its length: not scaled)
            if len(reader.read("bc", v_row)):
                seen_v_at = shown.elapsed()
                if protocol == "c3" and not shown.expired():
                    shown.met()
                break
            time.sleep(0.02)
        assert len(reader.read("ac", u_row)) == 0, "u crossed the partition"
    if protocol == "c3":
        if seen_v_at is None or seen_v_at > shown.seconds:
            raise shown.fail("never seen" if seen_v_at is None else f"seen after {seen_v_at:.2f} s")
    else:
        assert seen_v_at is None, f"saturn: v visible after {seen_v_at:.2f} s, before u's payload came"


def u_label_on_its_way(cluster: Cluster) -> tuple[float, float]:
    """Update labels a has sent, and those c's remote proxy received from a (saturn's tree)."""
    sent = metric_sum(cluster, "a", "causal_labels_sent_total", region="a", type="update")
    arrived = metric_sum(cluster, "c", "causal_labels_received_total", region="c", origin="a", type="update")
    return sent, arrived


def four_regions(protocol: str) -> dict:
    """l, j, i, m: every link 5 ms but l→m (300 ms). Group z at l, j, m; y at j, i; w at i, m."""
    sites = ["L", "J", "I", "M"]
    latency = {
        a: {b: (300 if {a, b} == {"L", "M"} else 5) for b in sites[k + 1 :]} for k, a in enumerate(sites[:-1])
    }
    return {
        "name": "four-regions", "protocol": protocol, "latency_ms": latency,
        "regions": [{"name": s.lower(), "site": s} for s in sites],
        "groups": {"z": ["l", "j", "m"], "y": ["j", "i"], "w": ["i", "m"]},
    }  # fmt: skip


@pytest.mark.cluster
@pytest.mark.parametrize("protocol", ["eventual", "c3"])
def test_a_dependency_on_an_update_a_region_does_not_replicate_is_kept(launch, protocol):
    """RoE takes the vector of what a region applies (docs/PROTOCOLS.md, "C3"). z is written at
    l; a writer at j reads it and writes y; a writer at i, which never has z, reads y and writes w;
    m has z and w but not y, and z reaches m slowly. w's past holds z only through y, so i's
    label for w must name z's origin although i never applied anything of it: m then shows w
    only after z. Under eventual m shows w first."""
    cluster = launch(four_regions(protocol))
    missed = 0
    rounds = 4
    with CausalClient.connect(cluster.topology.client_address("l")) as client:
        for _ in range(rounds):
            z, y, w = unique("z"), unique("y"), unique("w")
            client.session("l", auto_migrate=False).write("z", z, {"text": "z"})
            at_j = client.session("j", auto_migrate=False)
            eventually(lambda at_j=at_j, z=z: len(at_j.read("z", z)), timeout=10)
            at_j.write("y", y, {"text": "y, after z"})
            at_i = client.session("i", auto_migrate=False)
            eventually(lambda at_i=at_i, y=y: len(at_i.read("y", y)), timeout=10)
            at_i.write("w", w, {"text": "w, after y"})
            at_m = client.session("m", auto_migrate=False)
            eventually(lambda at_m=at_m, w=w: len(at_m.read("w", w)), timeout=10, interval=0.001)
            missed += len(at_m.read("z", z)) == 0
    expect_caught(protocol, missed, rounds, "a dependency through a region that lacks it")


@pytest.mark.cluster
def test_a_region_gone_while_it_writes_does_not_stall_the_others(launch, client_for):
    """Every process of a stopped while it writes (a region-outage). b applied a's last writes
    (5 ms away) before their labels reached c (100 ms away), so every write at b since depends
    on them. Labels on their way from a to c must arrive although a is gone, as bytes on a wire
    do: the receiver serves the link's latency (links.py, ``arrival_delay``), a's sender writes at
    once. Held in a's sender for the latency, they died with it, and c showed nothing of b until
    a came back. Back, a catches up."""
    cluster = launch("causality-3region.toml", protocol="c3")
    client = client_for(cluster)
    writer = Writer(client, 100_000).start()
    eventually(lambda: writer.done > 50, timeout=10)
    for name in reversed(region_processes(cluster, "a")):
        cluster.kill(name)
    b, c = client.session("b", auto_migrate=False), client.session("c", auto_migrate=False)
    for _ in range(3):
        for at, reader in ((b, c), (c, b)):
            row = unique("gone")
            at.write("all", row, {"v": "1"})
            eventually(lambda row=row, reader=reader: reader.read("all", row), timeout=5)
    for name in region_processes(cluster, "a"):
        cluster.restart(name)
    row = unique("back")
    b.write("all", row, {"v": "1"})
    a = client.session("a", auto_migrate=False)
    eventually(lambda: a.read("all", row), timeout=30)
