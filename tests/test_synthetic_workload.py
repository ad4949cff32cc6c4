"""The synthetic workload's buckets (loadtest/bench/synthetic_family.py): which regions replicate what a
client draws, under each correlation, as the paper's benchmark driver draws them."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import pytest
from helpers.topologies import TOPOLOGIES, load_topology

from loadtest.bench.synthetic import traffic_weights
from loadtest.bench.synthetic_family import CORRELATIONS, Buckets, Mix, inclusion, write_topology
from loadtest.harness import registry
from services.configure.inputs import weights_from_file
from services.topology import Topology


@pytest.fixture(scope="module")
def buckets() -> Buckets:
    return Buckets(load_topology("ec2-7region.toml"))


def test_inclusion_follows_the_drivers_rules():
    assert [inclusion("exponential", k, 7) for k in (1, 2, 3)] == [0.5, 0.25, 0.125]
    assert [round(inclusion("proportional", k, 7), 3) for k in (1, 6)] == [0.857, 0.143]
    assert inclusion("uniform", 4, 7) == 0.5 and inclusion("full", 6, 7) == 1.0
    with pytest.raises(ValueError, match="correlation"):
        inclusion("zipf", 1, 7)


def test_others_are_ordered_by_distance(buckets):
    assert buckets.others["ireland"][0] == "frankfurt"  # 10 ms
    assert buckets.others["ireland"][-1] == "sydney"  # 154 ms
    assert buckets.others["california"][0] == "oregon"


def test_every_set_of_regions_is_a_group_and_the_topology_loads(buckets, tmp_path):
    groups = buckets.groups()
    assert len(groups) == 2**7 - 1
    topology = Topology.load(write_topology(load_topology("ec2-7region.toml"), tmp_path / "t.toml"))
    assert set(groups) <= set(topology.group_members)
    assert topology.group_members[buckets.group(["ireland", "frankfurt"])] == ("ireland", "frankfurt")


@pytest.mark.parametrize("correlation", CORRELATIONS)
def test_local_buckets_hold_the_clients_region_and_closer_regions_more_often(buckets, correlation):
    rng = random.Random(7)
    groups = buckets.groups()
    draws = [groups[buckets.local("ireland", correlation, rng)] for _ in range(4000)]
    assert all("ireland" in members for members in draws)
    share = Counter(r for members in draws for r in members)
    closest, farthest = share["frankfurt"] / len(draws), share["sydney"] / len(draws)
    expected = (inclusion(correlation, 1, 7), inclusion(correlation, 6, 7))
    assert closest == pytest.approx(expected[0], abs=0.03)
    assert farthest == pytest.approx(expected[1], abs=0.03)


def test_remote_buckets_never_hold_the_clients_region_and_are_read_where_closest(buckets):
    rng = random.Random(3)
    groups = buckets.groups()
    for _ in range(2000):
        group, closest = buckets.remote("tokyo", "exponential", rng)
        members = groups[group]
        assert members and "tokyo" not in members and closest in members
        assert closest == min(members, key=buckets.others["tokyo"].index)
    assert buckets.remote("tokyo", "full", rng) is None, "under full replication nothing is remote"


def test_a_mix_refuses_what_it_cannot_be():
    with pytest.raises(ValueError, match="correlation"):
        Mix(correlation="random")
    with pytest.raises(ValueError, match="fractions"):
        Mix(read_fraction=1.5)
    with pytest.raises(ValueError, match="value_bytes"):
        Mix(value_bytes=0)
    assert Mix().name == "2 B, 90:10, exponential, 0 % remote"


def test_a_replication_degree_keeps_each_bucket_among_the_closest_regions(buckets):
    """Fig. 1b: degree d is the client's region and its d - 1 closest, every draw alike."""
    rng = random.Random(1)
    groups = buckets.groups()
    for degree in (1, 2, 5):
        drawn = {buckets.local("ireland", "exponential", rng, replicas=degree) for _ in range(20)}
        assert len(drawn) == 1
        assert set(groups[drawn.pop()]) == {"ireland", *buckets.others["ireland"][: degree - 1]}
    assert buckets.others["ireland"][:1] == ["frankfurt"]
    assert Mix(replicas=2).name == "2 B, 90:10, 2 closest replicas, 0 % remote"
    with pytest.raises(ValueError, match="replicas"):
        Mix(replicas=-1)


def test_traffic_weights_follow_the_correlation(buckets):
    """Per pair, the chance each one's writes reach the other, both ways added."""
    exponential = traffic_weights(buckets, "exponential")
    assert exponential["ireland"]["frankfurt"] == 1.0  # each is the other's closest: 1/2 + 1/2
    assert exponential["virginia"]["sydney"] < 0.1  # far from both sides
    full = traffic_weights(buckets, "full")
    assert {w for row in full.values() for w in row.values()} == {2.0}
    assert sum(len(row) for row in full.values()) == 21  # every pair once


def test_the_generator_builds_another_tree_for_the_workloads_traffic(tmp_path):
    """The weights file the workload writes is what ``services.configure --weights`` reads; for the
    paper's default workload (exponential correlation) it yields another tree than equal weights,
    with a smaller mismatch where the traffic is (the shipped ec2-7region-mx.toml)."""
    base = load_topology("ec2-7region.toml")
    weights_file = tmp_path / "weights.json"
    argv = ["weights", str(TOPOLOGIES / "ec2-7region.toml"), "--out", str(weights_file)]
    assert registry.run("synthetic", argv) == 0
    shipped_weights = TOPOLOGIES / "ec2-7region-exponential-weights.json"
    assert json.loads(weights_file.read_text()) == json.loads(shipped_weights.read_text()), "regenerate it"
    weights = weights_from_file(base, weights_file)
    assert weights[frozenset(("ireland", "frankfurt"))] == 1.0
    shipped = load_topology("ec2-7region-mx.toml")
    equal = load_topology("ec2-7region-m.toml")

    def lag(topology: Topology) -> float:
        pairs = [frozenset((a, b)) for a, b in itertools.combinations(topology.region_names, 2)]
        total = sum(
            weights[p] * abs(topology.tree_path_ms(*p) - topology.region_latency_ms(*p)) for p in pairs
        )
        return total / sum(weights[p] for p in pairs)

    assert {s.name for s in shipped.serializers} != {s.name for s in equal.serializers}
    assert lag(shipped) < 0.6 * lag(equal)
