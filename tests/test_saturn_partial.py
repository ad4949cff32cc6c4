"""Genuine partial replication under saturn (paper §5.3): on demo-3region-partial, a region
receives neither the labels (from the tree) nor the payloads (from bulk transfer) of a group it
does not replicate, and a migration label travels only towards its target region.

The counters are per origin region, not per group, so each test writes one group from one region
and diffs every region's /metrics around it. A sentinel of group "all" written last by the same
region follows the group's labels and payloads down every FIFO path: once it is visible
everywhere, whatever was going to arrive has, and the counts are final.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from helpers.clusters import metric_samples
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import CausalClient, NotReplicatedHere
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

REGIONS = ("virginia", "ireland", "frankfurt")
GROUPS = {
    "all": {"virginia", "ireland", "frankfurt"},
    "atlantic": {"virginia", "ireland"},
    "europe": {"ireland", "frankfurt"},
    "us-only": {"virginia"},
    "eu-central": {"frankfurt"},
}
WRITES = 3
LABELS_RECEIVED = "causal_labels_received_total"
LABELS_SENT = "causal_labels_sent_total"
BULK_RECEIVED = "causal_bulk_payloads_received_total"


@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Iterator[Cluster]:
    topology = load_topology("demo-3region-partial.toml", protocol="saturn")
    with Cluster(topology, tmp_path_factory.mktemp("saturn-partial")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(partial) -> Iterator[CausalClient]:
    with CausalClient.connect(partial.topology.client_address("virginia")) as client:
        yield client


def test_the_topology_matches_the_groups_checked_here(partial):
    assert {g: set(m) for g, m in partial.topology.group_members.items()} == GROUPS


def scrape(cluster: Cluster) -> Counter:
    """Every region's Saturn and bulk counters: (metric, region, origin or "", type or "") → value."""
    counts: Counter = Counter()
    wanted = {LABELS_RECEIVED, LABELS_SENT, BULK_RECEIVED}
    for region in REGIONS:
        for sample in metric_samples(cluster, region):
            if sample.name in wanted:
                assert sample.labels["region"] == region, sample
                origin, kind = sample.labels.get("origin", ""), sample.labels.get("type", "")
                counts[(sample.name, region, origin, kind)] += sample.value
    return counts


def delta(before: Counter, after: Counter) -> Counter:
    """What changed, without the heartbeats (they go everywhere, all the time)."""
    changes = Counter()
    for key in set(before) | set(after):
        if key[3] != "heartbeat" and after[key] != before[key]:
            changes[key] = after[key] - before[key]
    return changes


def settle(client: CausalClient, origin: str) -> None:
    """Writes a sentinel of group "all" at ``origin`` and waits until every region shows it."""
    row = unique("sentinel")
    client.session(origin, auto_migrate=False).write("all", row, {"s": "1"})
    for region in REGIONS:
        reader = client.session(region, auto_migrate=False)
        eventually(lambda reader=reader: len(reader.read("all", row)) > 0)


PHASES = [(group, origin) for group, members in GROUPS.items() for origin in sorted(members)]


@pytest.mark.parametrize(("group", "origin"), PHASES, ids=[f"{g}@{o}" for g, o in PHASES])
def test_labels_and_payloads_reach_only_the_groups_replicas(partial, client, group, origin):
    members = GROUPS[group]
    settle(client, origin)  # nothing of an earlier test still on its way
    before = scrape(partial)
    writer = client.session(origin, auto_migrate=False)
    rows = [unique(f"{group}-{i}") for i in range(WRITES)]
    for row in rows:
        writer.write(group, row, {"from": origin})
    settle(client, origin)
    changes = delta(before, scrape(partial))

    expected = Counter()
    others = [r for r in REGIONS if r != origin]
    for region in others:
        n = WRITES + 1 if region in members else 1  # the group's writes and the sentinel, or the sentinel
        expected[(LABELS_RECEIVED, region, origin, "update")] = n
        expected[(BULK_RECEIVED, region, origin, "")] = n
    expected[(LABELS_SENT, origin, "", "update")] = WRITES + 1 if len(members) > 1 else 1
    assert changes == expected, f"{group} written at {origin}"

    for region in others:
        reader = client.session(region, auto_migrate=False)
        for row in rows:
            if region in members:
                assert reader.read(group, row).text("from") == origin
            else:
                with pytest.raises(NotReplicatedHere):
                    reader.read(group, row)


def test_heartbeats_reach_every_region_from_every_other(partial, client):
    """The counters the tests above rely on are live: each region hears every other one."""
    before = scrape(partial)

    def all_heard() -> bool:
        now = scrape(partial)
        return all(
            now[(LABELS_RECEIVED, r, o, "heartbeat")] > before[(LABELS_RECEIVED, r, o, "heartbeat")]
            for r in REGIONS
            for o in REGIONS
            if o != r
        )

    eventually(all_heard, timeout=5, interval=0.05)


def test_migration_labels_travel_only_towards_their_target(partial, client):
    """Three sessions leave virginia: for ireland, frankfurt, ireland again. Each attach waits for
    its label at the target; a label wrongly sent to the other European region would be ahead of
    the next migration's label on the same FIFO path, so the counts are final on return."""
    settle(client, "virginia")
    before = scrape(partial)
    for target in ("ireland", "frankfurt", "ireland"):
        session = client.session("virginia")
        session.write("all", unique("leaving"), {"to": target})
        session.migrate(target)
        assert session.region == target
    settle(client, "virginia")
    changes = delta(before, scrape(partial))
    migrations = {k: v for k, v in changes.items() if k[3] == "migration"}
    assert migrations == {
        (LABELS_SENT, "virginia", "", "migration"): 3,
        (LABELS_RECEIVED, "ireland", "virginia", "migration"): 2,
        (LABELS_RECEIVED, "frankfurt", "virginia", "migration"): 1,
    }
