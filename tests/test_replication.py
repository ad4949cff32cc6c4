"""Genuine partial replication (demo-3region-partial.toml): a group's rows reach exactly its regions,
and sessions migrate transparently to the closest replica of a group not stored where they are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from helpers.clusters import metric_samples
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import CausalClient, NotReplicatedHere
from services.launcher.cluster import Cluster
from services.region import gears

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

REGIONS = ("virginia", "ireland", "frankfurt")
GROUPS = {
    "all": {"virginia", "ireland", "frankfurt"},
    "atlantic": {"virginia", "ireland"},
    "europe": {"ireland", "frankfurt"},
    "us-only": {"virginia"},
    "eu-central": {"frankfurt"},
}


@pytest.fixture(scope="module")
def partial(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One partial-replication cluster for the module (the ``launch`` fixture, module-scoped)."""
    cluster = Cluster(load_topology("demo-3region-partial.toml"), tmp_path_factory.mktemp("partial"))
    with cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(partial) -> Iterator[CausalClient]:
    with CausalClient.connect(partial.topology.client_address("virginia")) as client:
        yield client


def bulk_counts(cluster: Cluster, direction: str) -> dict[tuple[str, str], float]:
    """causal_bulk_payloads_{direction}_total per (region, other region), from every region's
    /metrics: the other region is the origin for "received", the destination for "sent"."""
    name = f"causal_bulk_payloads_{direction}_total"
    other = "origin" if direction == "received" else "destination"
    counts: dict[tuple[str, str], float] = {}
    for region in REGIONS:
        for sample in metric_samples(cluster, region):
            if sample.name == name:
                assert sample.labels["region"] == region
                key = (region, sample.labels[other])
                counts[key] = counts.get(key, 0) + sample.value
    return counts


def received(cluster: Cluster) -> dict[tuple[str, str], float]:
    return bulk_counts(cluster, "received")


def sent(cluster: Cluster) -> dict[tuple[str, str], float]:
    return bulk_counts(cluster, "sent")


def stored_at(cluster: Cluster, region: str, group: str, row: str) -> bool:
    """Whether any trace of the row is in the region's Redis (not only what the frontend serves)."""
    shard = cluster.topology.shard_of(region, group, row)
    with redis.Redis.from_url(cluster.topology.redis_url(region, shard)) as r:
        return any(
            r.exists(key) for key in gears.row_keys(cluster.topology.shard_tag(region, shard), group, row)
        )


def wait_shipped(client: CausalClient, origin: str) -> None:
    """Returns once everything ``origin`` wrote so far has reached every region it is going to:
    a gear's stream is shipped in order, so a sentinel of group ``all`` arrives last."""
    row = unique("sentinel")
    client.session(origin).write("all", row, {"s": "1"})
    for region in REGIONS:
        reader = client.session(region)
        eventually(lambda reader=reader: reader.read("all", row))


@pytest.mark.parametrize("group", list(GROUPS))
def test_a_write_reaches_exactly_the_regions_of_its_group(partial, client, group):
    members = GROUPS[group]
    origin = min(members)  # any member will do
    before, sent_before = received(partial), sent(partial)
    row = unique(f"rep-{group}")
    writer = client.session(origin, auto_migrate=False)
    writes = 3
    for i in range(writes):
        writer.write(group, row, {f"c{i}": group})
    wait_shipped(client, origin)
    after, sent_after = received(partial), sent(partial)

    for region in REGIONS:
        delta = after.get((region, origin), 0) - before.get((region, origin), 0)
        shipped = sent_after.get((origin, region), 0) - sent_before.get((origin, region), 0)
        if region == origin:
            assert (region, origin) not in after and (origin, region) not in sent_after
            continue
        reader = client.session(region, auto_migrate=False)
        if region in members:
            assert reader.read(group, row).as_dict() == {f"c{i}": group.encode() for i in range(writes)}
            assert stored_at(partial, region, group, row)
            assert delta == shipped == writes + 1, (region, delta, shipped)  # writes + sentinel
        else:
            with pytest.raises(NotReplicatedHere):
                reader.read(group, row)
            assert not stored_at(partial, region, group, row), region
            assert delta == shipped == 1, (region, delta, shipped)  # the sentinel only
    assert stored_at(partial, origin, group, row)


def test_payloads_only_flow_between_regions_that_share_a_group(partial, client):
    wait_shipped(client, "ireland")
    counts = received(partial)
    # every pair shares "all" here: each region has heard from both others, never from itself
    for region in REGIONS:
        origins = {o for (r, o) in counts if r == region}
        assert origins == set(REGIONS) - {region}, (region, origins)


def test_auto_migration_to_the_closest_replica(partial, client):
    session = client.session("virginia")
    row = unique("auto")
    past = session.write("all", unique("before"), {"c": "1"})
    label = session.write("europe", row, {"city": "Dublin"})
    # ireland (41 ms from Virginia) is closer than frankfurt (45 ms)
    assert session.region == "ireland"
    assert label.src == "ireland/0" and label > past and session.label == label
    assert session.read("europe", row).text("city") == "Dublin"
    frankfurt = client.session("frankfurt")
    eventually(lambda: frankfurt.read("europe", row).text("city") == "Dublin")
    wait_shipped(client, "ireland")
    assert not stored_at(partial, "virginia", "europe", row)


def test_auto_migration_on_read_and_from_europe(partial, client):
    row = unique("auto-read")
    client.session("frankfurt").write("eu-central", row, {"c": "only here"})
    session = client.session("ireland")
    assert session.read("eu-central", row).text("c") == "only here"  # frankfurt has the only copy
    assert session.region == "frankfurt"
    session.write("atlantic", row, {"c": "x"})  # ireland (10 ms) beats virginia (45 ms)
    assert session.region == "ireland"
    session.increment("us-only", row, "n")
    assert session.region == "virginia"
    # virginia replicates atlantic: no move (and with `eventual`, attach does not wait for the
    # session's past, so the write made in ireland shows up here when it arrives)
    eventually(lambda: session.read("atlantic", row).text("c") == "x")
    assert session.region == "virginia"


def test_auto_migration_carries_the_label_along(partial, client):
    session = client.session("virginia")
    row = unique("past")
    session.write("us-only", row, {"c": "1"})
    before = session.label
    session.write("eu-central", row, {"c": "2"})
    assert session.region == "frankfurt" and session.label > before
    resumed = client.session("frankfurt", label=session.token)
    assert resumed.read("eu-central", row).text("c") == "2"


def test_no_auto_migration_when_disabled(partial, client):
    session = client.session("virginia", auto_migrate=False)
    row = unique("stay")
    with pytest.raises(NotReplicatedHere) as info:
        session.write("europe", row, {"c": "v"})
    assert (info.value.group, info.value.region) == ("europe", "virginia")
    assert session.region == "virginia"
    for region in REGIONS:
        assert not stored_at(partial, region, "europe", row)
