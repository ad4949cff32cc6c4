"""The slow-shard probe (loadtest/check/shard_probe.py): which regions it probes, and how its rows
are set against the faults (no processes). The probe itself runs in the checker's cluster tests."""

from __future__ import annotations

from helpers.topologies import load_topology

from loadtest.check.shard_probe import probed_regions, shard_effects
from services.topology import Topology


def with_shards(topology: Topology, shards: int) -> Topology:
    data = topology.model_dump()
    for region in data["regions"]:
        region["shards"] = shards
    return Topology.model_validate(data)


def test_every_region_of_two_shards_is_probed_from_a_region_that_shares_a_group():
    topology = load_topology("causality-3region.toml")
    assert probed_regions(topology) == []  # one shard each: nothing beside a slow one
    probed = probed_regions(with_shards(topology, 2))
    assert [r for r, _, _ in probed] == list(topology.region_names)
    for region, writer, group in probed:
        assert writer != region and {region, writer} <= set(topology.group_members[group])


def test_partial_replication_picks_a_group_the_two_regions_share():
    topology = with_shards(load_topology("demo-3region-partial.toml"), 2)
    for region, writer, group in probed_regions(topology):
        assert {region, writer} <= set(topology.group_members[group])


def sample(t: float, region: str, shard: int, ms: float | None) -> dict:
    return {"t": t, "region": region, "shard": shard, "ms": ms}


def test_rows_are_set_by_the_shard_that_was_slowed_and_the_time_no_fault_was_on():
    faults = [
        {"fault": "slow-shard", "target": "b.redis1", "start": 10.0, "end": 12.0},
        {"fault": "partition", "target": "A|C", "start": 20.0, "end": 22.0},
    ]
    samples = [
        sample(1.0, "b", 0, 8.0), sample(2.0, "b", 1, 12.0), sample(3.0, "a", 0, None),  # quiet
        sample(10.5, "b", 1, 300.0), sample(11.0, "b", 1, None),  # the slowed shard
        sample(10.7, "b", 0, 9.0),  # b's other shard, meanwhile
        sample(11.2, "a", 0, 500.0),  # another region while b was slowed: neither
        sample(21.0, "b", 0, 900.0),  # another fault: left out
    ]  # fmt: skip
    effects = shard_effects(faults, samples)
    assert effects == {
        "slowed_shard_ms": 300.0,
        "other_shards_ms": 9.0,
        "without_faults_ms": 10.0,
        "samples": {"slowed": 2, "others": 1, "quiet": 3},
        "not_seen": {"slowed": 1, "others": 0, "quiet": 1},
    }


def test_no_probes_or_no_slow_shard_gives_nothing():
    assert shard_effects([], [sample(1.0, "b", 0, 8.0)]) is None
    assert shard_effects([{"fault": "slow-shard", "target": "b.redis0", "start": 1, "end": 2}], []) is None
