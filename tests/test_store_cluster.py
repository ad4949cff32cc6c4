"""A region's store on Redis Cluster (``[store] engine = "cluster"``): the shards' slots are
placed on the masters as the topology says, every key a gear call touches is in its shard's
slot, a call sent to the wrong master is redirected by Redis (the module declares its key), and
updates replicate between cluster regions as between standalone ones. The topology refuses
what a cluster cannot be (more masters than shards, more nodes than a region has ports)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable

import pytest
import redis
from helpers.clusters import metric_sum
from helpers.deadlines import scaled
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from causal_client import (
    CausalClient,
    CausalError,
    InvalidRequest,
    Mutation,
    OutcomeUnknown,
    ReadSpec,
    RegionUnavailable,
    wire,
)
from causal_client.label import Label
from causal_client.transactions import write_args
from services import metrics
from services.launcher.__main__ import main as launcher_main
from services.launcher.cluster import Cluster
from services.launcher.store_cluster import master_of, master_slots, move_shard, shard_slot
from services.region import gears
from services.region.sync_shard import SyncShard
from services.saturn import epochs
from services.topology import Topology, TopologyError

SHARDS, MASTERS, REPLICAS = 6, 3, 1  # three masters: a failover needs a majority of them


def cluster_topology(protocol: str = "saturn", shards: int = SHARDS, **store) -> dict:
    data = load_topology("two-region.toml", protocol=protocol).model_dump()
    for region in data["regions"]:
        region["shards"] = shards
    data["store"] = {
        "engine": "cluster",
        "masters": MASTERS,
        "replicas": REPLICAS,
        "node_timeout_ms": 1000,
        **store,
    }
    return data


# -- no processes --------------------------------------------------------------------------------
@pytest.mark.parametrize(("shards", "masters"), [(1, 1), (4, 2), (16, 4), (64, 8), (5, 3)])
def test_every_slot_is_served_once_and_each_shard_is_on_its_master(shards, masters):
    ranges = master_slots([k % masters for k in range(shards)], masters)
    served = sorted(
        slot for per_master in ranges for first, last in per_master for slot in range(first, last + 1)
    )
    assert served == list(range(REDIS_CLUSTER_HASH_SLOTS))
    for k in range(shards):
        assert any(first <= shard_slot(k) <= last for first, last in ranges[k % masters])


def test_a_shards_keys_share_its_slot():
    tag = wire.shard_tag(3)
    keys = [gears.shard_key(name, tag) for name in gears.SHARD_KEYS.values()]
    keys += gears.row_keys(tag, "all", "u{17}:x")  # a row name with braces of its own
    assert {key_slot(k.encode()) for k in keys} == {key_slot(tag.encode())}


def test_the_topology_places_shards_and_names_every_node():
    t = load_topology(cluster_topology())
    assert t.store_nodes("a") == MASTERS * (1 + REPLICAS)
    assert [t.shard_node("a", k) for k in range(SHARDS)] == [0, 1, 2, 0, 1, 2]
    assert len(t.store_endpoints("a")) == MASTERS * (1 + REPLICAS)
    assert t.describe()["regions"][0]["shards"] == [0, 1, 2, 0, 1, 2]
    bus = [t.cluster_bus_port(r, k) for r in t.region_names for k in range(t.store_nodes(r))]
    assert len(set(bus)) == len(bus) and not set(bus) & {port for _, port in t.all_ports() if port not in bus}


@pytest.mark.parametrize(
    ("store", "shards", "complaint"),
    [
        ({"masters": 4}, 2, "cannot spread over store.masters"),
        ({"masters": 4, "replicas": 2}, 4, "more than the 10"),
        ({"engine": "sharded"}, 4, "engine"),
    ],
)
def test_the_topology_refuses_what_a_cluster_cannot_be(store, shards, complaint):
    with pytest.raises((TopologyError, ValueError), match=complaint):
        Topology.from_dict(cluster_topology(shards=shards, **store))


# -- a running cluster region --------------------------------------------------------------------


@pytest.fixture(scope="module")
def clustered(tmp_path_factory):
    cluster = Cluster(load_topology(cluster_topology()), tmp_path_factory.mktemp("store-cluster"))
    with cluster:
        client = CausalClient.connect(cluster.topology.client_address("a"))
        try:
            yield cluster, client
        finally:
            client.close()


def node(cluster: Cluster, region: str, k: int) -> redis.Redis:
    t = cluster.topology
    return redis.Redis(host=t.node_host(region), port=t.redis_port(region, k))


@pytest.mark.cluster
def test_each_master_serves_its_shards_and_each_replica_follows_one(clustered):
    cluster, _ = clustered
    t = cluster.topology
    for region in t.region_names:
        with node(cluster, region, t.store_nodes(region) - 1) as any_node:
            slots = any_node.execute_command("CLUSTER", "SLOTS")  # [first, last, master, *replicas]
        for shard in range(SHARDS):
            _, _, master, *replicas = next(s for s in slots if s[0] <= shard_slot(shard) <= s[1])
            assert master[1] == t.redis_port(region, shard % MASTERS)
            assert len(replicas) == REPLICAS
        roles = []
        for k in range(t.store_nodes(region)):
            with node(cluster, region, k) as store:
                roles.append(store.info("replication")["role"])
        assert roles == ["master"] * MASTERS + ["slave"] * (MASTERS * REPLICAS)


@pytest.mark.cluster
def test_rows_replicate_between_cluster_regions_and_land_in_their_shards_slot(clustered):
    cluster, client = clustered
    t = cluster.topology
    rows = [unique("c") for _ in range(12)]
    session = client.session("a")
    label = None
    for i, row in enumerate(rows):
        label = session.write("all", row, {"v": str(i)})
    session.batch([Mutation("all", rows[0]).set("w", "x"), Mutation("all", rows[1]).set("w", "y")])
    reader = client.session("b", label=label)
    eventually(lambda: [r.text("v") for r in reader.multi_read([ReadSpec("all", r) for r in rows])]
               == [str(i) for i in range(len(rows))])  # fmt: skip
    for region in t.region_names:
        for row in rows:
            shard = t.shard_of(region, "all", row)
            with redis.Redis.from_url(t.redis_url(region, shard)) as store:
                data_key = gears.row_keys(t.shard_tag(region, shard), "all", row)[0]
                assert store.exists(data_key) == 1, f"{row} is not on its shard's master at {region}"


@pytest.mark.cluster
def test_a_call_at_the_wrong_master_is_redirected_by_the_cluster(clustered):
    """The module declares the shard's tag as its key, so Redis Cluster answers a call for a
    shard that another master holds with MOVED to it, before any gear runs."""
    cluster, _ = clustered
    t = cluster.topology
    args = write_args(Label.zero(), ["1"], [Mutation("all", unique("m")).set("v", "1")])
    moved = rf"^{shard_slot(1)} .*:{t.redis_port('a', 1)}$"  # MOVED <slot> <host:port>
    with node(cluster, "a", 0) as first_master, pytest.raises(redis.exceptions.MovedError, match=moved):
        first_master.execute_command("SATURN.CALL", wire.WRITE, 1, wire.shard_tag(1), *args)


@pytest.mark.cluster
def test_a_client_learns_the_topology_at_any_node_of_a_cluster_region(clustered):
    """Any node answers ``connect``: one that does not serve shard 0 (another master, a
    replica) names the one that does, and the client asks it there. Given several addresses,
    one where nothing listens is passed over."""
    cluster, _ = clustered
    t = cluster.topology
    for address in t.store_endpoints("a"):
        with CausalClient.connect(address) as client:
            assert client.regions["a"].nodes
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    with CausalClient.connect([dead, t.store_endpoints("a")[-1]]) as client:
        assert set(client.regions) == set(t.region_names)


@pytest.mark.cluster
def test_a_write_is_acknowledged_only_once_its_masters_replica_has_it(clustered):
    """With its master's replica stopped, a write on that master's shard is not acknowledged: it
    is made there, but a failover could lose it, so the client is told its outcome is unknown
    (WAIT); a shard on the other master writes as usual, and once the replica is back so does
    the first. Under ``acknowledge = "master"`` the first write would have been acknowledged."""
    cluster, _ = clustered
    t = cluster.topology
    replica = cluster.processes[f"a.redis{MASTERS}"].popen  # the first replica: master 0's
    rows = [unique("w") for _ in range(100)]
    on_master = {m: next(r for r in rows if t.shard_of("a", "all", r) % MASTERS == m) for m in range(MASTERS)}
    with CausalClient.connect(t.client_address("a"), timeout=2.0) as client:
        session = client.session("a")
        replica.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(OutcomeUnknown, match="no replica confirmed it"):
                session.write("all", on_master[0], {"v": "1"})
            session.write("all", on_master[1], {"v": "1"})
        finally:
            replica.send_signal(signal.SIGCONT)
        eventually(lambda: session.write("all", on_master[0], {"v": "2"}) is not None)
        assert session.read("all", on_master[0]).text("v") == "2"


def until_available(check: Callable[[], bool]) -> Callable[[], bool]:
    """``check``, False while the region is unavailable (a failover under way)."""

    def attempt() -> bool:
        try:
            return check()
        except RegionUnavailable:
            return False

    return attempt


@pytest.mark.cluster
def test_a_refused_write_is_refused_with_its_reason_when_replicas_must_acknowledge(clustered):
    """The write and its WAIT go in one pipeline: a gear's refusal still comes back as its own
    typed error, not as the pipeline's re-worded one."""
    _, client = clustered
    with pytest.raises(InvalidRequest, match="unknown group"):
        client.session("a").write("no-such-group", unique("r"), {"v": "1"})


@pytest.mark.cluster
def test_a_shard_moves_to_another_master_while_the_region_serves(clustered):
    """Shard 0 moves from master 0 to master 1 (its slot and every key of it) while a client
    writes to it: calls meanwhile wait (the shard is fenced, then the cluster redirects), none
    runs on half of its keys; every acknowledged write is there after, at a and at b, and the
    shard is served from its new master."""
    cluster, client = clustered
    t = cluster.topology
    rows = [r for r in (unique("mv") for _ in range(400)) if t.shard_of("a", "all", r) == 0][:30]
    writer = client.session("a")
    for i, row in enumerate(rows[:10]):
        writer.write("all", row, {"v": str(i)})
    command = ["--run-dir", str(cluster.run_dir), "move-shard", "a", "0", "1"]  # as an operator would
    moving = threading.Thread(target=lambda: moved.append(launcher_main(command)))
    moved: list[int] = []
    moving.start()
    for i, row in enumerate(rows[10:], start=10):  # during the move and after it
        eventually(until_available(lambda r=row, v=str(i): writer.write("all", r, {"v": v}) is not None))
    moving.join(scaled(30))
    assert moved == [0] and master_of(t, "a", 0, None) == 1
    specs = [ReadSpec("all", r) for r in rows]
    for region in t.region_names:
        reader = client.session(region, label=writer.label)
        seen = until_available(
            lambda r=reader: [x.text("v") for x in r.multi_read(specs)] == [str(i) for i in range(30)]
        )
        eventually(seen, timeout=20)
    with node(cluster, "a", 1) as new_master:
        assert int(new_master.execute_command("CLUSTER", "COUNTKEYSINSLOT", shard_slot(0))) > 0


@pytest.mark.cluster
def test_the_tree_record_and_the_attach_metric_follow_a_moved_shard(clustered):
    """Shard 0 (moved to master 1 above) holds the tree record and the attach gear's counts. The
    synchronous readers and writers outside the services (``epochs.publish`` and ``progress``,
    as ``reconfigure`` uses them, and the metric a scrape reads) follow it there, as the
    services do, rather than failing with MOVED at the node the topology first placed it on."""
    cluster, client = clustered
    t = cluster.topology
    assert master_of(t, "a", 0, None) != t.shard_node("a", 0)
    epochs.publish(t, send=True)
    assert epochs.progress(t)["a"] == epochs.progress(t)["b"]
    with node(cluster, "a", master_of(t, "a", 0, None)) as now:
        record = now.hgetall(gears.shard_key(gears.TREE_KEY, t.shard_tag("a", 0)))
    assert record[epochs.EPOCH.encode()] == str(t.epoch).encode()
    session = client.session("b")
    session.migrate("a")  # an attach at a: counted in shard 0
    waits_key = gears.shard_key(gears.ATTACH_WAITS_KEY, t.shard_tag("a", 0))
    with SyncShard(t, "a", 0, timeout=2.0) as shard:
        (family,) = metrics.AttachWaits("a", shard, waits_key).collect()
        assert shard.url.endswith(f":{t.redis_port('a', master_of(t, 'a', 0, None))}/0")
    assert [s for s in family.samples if s.name.endswith("_count") and s.value > 0]


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["a", "99", "1"], "no shard 99"),
        (["nowhere", "0", "1"], "nowhere"),
        (["a", "0", "42"], "no store node 42"),
    ],
)
def test_moving_a_shard_that_is_not_there_is_refused(clustered, capsys, args, complaint):
    cluster, _ = clustered
    assert launcher_main(["--run-dir", str(cluster.run_dir), "move-shard", *args]) == 2
    assert complaint in capsys.readouterr().err


@pytest.mark.cluster
def test_a_write_its_replica_never_had_is_never_shipped_before_a_failover_loses_it(clustered):
    """The sequence a failover could break: a master takes a write its replica does not get (the
    replica stopped, its link cut: the client is told the outcome is unknown), the region's sink and bulk
    sender read it from the master's streams, then the master dies and the replica, which never
    had it, is promoted. The write is gone at home, so it must never reach region b: the services
    ship only what a replica has (a WAIT on the connection they read with). Without that wait
    the label and payload leave at once and b shows a row that a does not have, for good."""
    cluster, _ = clustered
    t = cluster.topology
    master = 2  # (shard 0 moved to master 1 above; the kill test below is master 0's)
    replica = next(
        k for k in range(MASTERS, t.store_nodes("a"))
        if _replica_of(cluster, k) == master
    )  # fmt: skip
    shard = next(k for k in range(SHARDS) if master_of(t, "a", k, None) == master)
    rows = [r for r in (unique("lost") for _ in range(300)) if t.shard_of("a", "all", r) == shard][:2]
    lost, later = rows
    replicated = gears.shard_key(gears.REPLICATED_KEY, t.shard_tag("a", shard))

    def reads_waiting() -> int:  # a service's read of the shard's streams, each counted before its WAIT
        with node(cluster, "a", master) as at_master:
            return int(at_master.get(replicated) or 0)

    with CausalClient.connect(t.client_address("b"), timeout=2.0) as client:
        writer = client.session("a")
        stopped = cluster.processes[f"a.redis{replica}"].popen
        stopped.send_signal(signal.SIGSTOP)
        try:
            with node(cluster, "a", master) as at_master:  # (what it sent before is in the
                at_master.execute_command("CLIENT", "KILL", "TYPE", "replica")  # replica's socket)
            before = reads_waiting()
            with pytest.raises(OutcomeUnknown, match="no replica confirmed it"):
                writer.write("all", lost, {"v": "never-replicated"})
            # The sink and the bulk sender (one read in one process, services/bulk/tail.py) have
            # read it and wait for the replica.
            eventually(lambda: reads_waiting() > before, timeout=10, what="a's services reading the write")
            cluster.kill(f"a.redis{master}")
        finally:
            stopped.send_signal(signal.SIGCONT)
        with node(cluster, "a", replica) as promoted:
            eventually(lambda: promoted.info("replication")["role"] == "master", timeout=20)
        cluster.restart(f"a.redis{master}")  # it comes back as the new master's replica
        with node(cluster, "a", master) as old:
            eventually(lambda: old.info("replication").get("master_link_status") == "up", timeout=20)
        written = until_available(lambda: writer.write("all", later, {"v": "after"}) is not None)
        eventually(written, timeout=20)
        reader = client.session("b", label=writer.label)
        eventually(until_available(lambda: reader.read("all", later).text("v") == "after"), timeout=20)
        assert client.session("a").read("all", lost).text("v") is None, "the write was not lost"
        assert reader.read("all", lost).text("v") is None, "b shows a write its home region lost"


def marked_failed(cluster: Cluster, k: int, by: list[int]) -> bool:
    """Whether each of region a's nodes ``by`` says node ``k`` has failed (CLUSTER NODES)."""
    address = f"{cluster.topology.node_host('a')}:{cluster.topology.redis_port('a', k)}@"
    for j in by:
        with node(cluster, "a", j) as store:
            lines = store.execute_command("CLUSTER", "NODES").decode().splitlines()
        flags = next(line.split()[2] for line in lines if line.split()[1].startswith(address))
        if "fail" not in flags.split(","):
            return False
    return True


def _replica_of(cluster: Cluster, k: int) -> int | None:
    """The index of the master that region a's node ``k`` follows (None: it is a master)."""
    t = cluster.topology
    with node(cluster, "a", k) as store:
        info = store.info("replication")
    if info["role"] != "slave":
        return None
    return [t.redis_port("a", j) for j in range(t.store_nodes("a"))].index(int(info["master_port"]))


@pytest.mark.cluster
def test_a_killed_masters_replica_takes_over_and_loses_nothing_acknowledged(clustered):
    """Master 0 of region a is killed and kept down past the cluster's node timeout: its replica
    is promoted. The killed node, started again, follows it as its replica (so that a write can
    be acknowledged again: it needs a replica). Every write acknowledged before the kill is
    there, at a and, through the services that followed the shard to its new master, at b;
    writes to its shard go on. (Last in the module: it leaves the masters' roles changed.)"""
    cluster, _ = clustered
    t = cluster.topology
    rows = [unique("f") for _ in range(40)]
    with CausalClient.connect(t.client_address("b")) as client:
        writer = client.session("a")
        for i, row in enumerate(rows):
            writer.write("all", row, {"v": str(i)})
        on_killed = [r for r in rows if master_of(t, "a", t.shard_of("a", "all", r), None) == 0]
        candidates = (unique("e") for _ in range(100))
        elsewhere = next(r for r in candidates if master_of(t, "a", t.shard_of("a", "all", r), None) != 0)
        # Its replica held back first: the master is down and nobody has taken its place yet.
        held_replica = cluster.processes[f"a.redis{MASTERS}"].popen  # master 0's
        held_replica.send_signal(signal.SIGSTOP)
        try:
            cluster.kill("a.redis0")  # SIGKILL, held down: its replica must take over
            up = [k for k in range(t.store_nodes("a")) if k not in (0, MASTERS)]
            eventually(
                lambda: marked_failed(cluster, 0, up), timeout=10, what="the cluster marking a.redis0 failed"
            )
            _connects_and_serves_while_a_master_is_down(cluster, client, elsewhere)
        finally:
            held_replica.send_signal(signal.SIGCONT)
        with node(cluster, "a", MASTERS) as replica:  # master 0's
            eventually(lambda: replica.info("replication")["role"] == "master", timeout=15)
        shard = t.shard_of("a", "all", on_killed[0])
        eventually(lambda: master_of(t, "a", shard, None) == MASTERS, timeout=15)  # the cluster says so
        # A client that knows only the first placement reads it in one call: its read (harmless
        # twice) finds the dead master gone and asks the next node, which names the new one.
        with CausalClient.connect(t.store_endpoints("a")[1:]) as fresh:
            assert fresh.session("a").read("all", on_killed[0]).text("v") == str(rows.index(on_killed[0]))
        cluster.restart("a.redis0")
        with node(cluster, "a", 0) as old_master:
            eventually(lambda: old_master.info("replication").get("master_link_status") == "up", timeout=15)
        after = [unique("g") for _ in range(10)]

        def write_after() -> bool:
            for row in after:  # the same value again after an unknown outcome: harmless
                writer.write("all", row, {"v": "after"})
            return True

        eventually(until_available(write_after), timeout=20)
        expect = [str(i) for i in range(len(rows))] + ["after"] * len(after)
        specs = [ReadSpec("all", x) for x in rows + after]
        for region in t.region_names:
            reader = client.session(region, label=writer.label)
            seen = until_available(lambda r=reader: [x.text("v") for x in r.multi_read(specs)] == expect)
            eventually(seen, timeout=20)
        # A gateway that crashes now starts again: its install's keyless FUNCTION LOAD went to
        # the node it was configured with, a replica since the failover, and was refused
        # (READONLY); it exited at every start, and the supervisor gave it up (the soak found it).
        dead = cluster.processes["a.frontend0"].popen.pid
        os.kill(dead, signal.SIGKILL)

        def back() -> bool:
            running = cluster.processes["a.frontend0"]
            return (
                running.popen.pid != dead
                and running.popen.poll() is None
                and cluster.is_healthy(running.spec)
            )

        eventually(back, timeout=30)


def _connects_and_serves_while_a_master_is_down(
    cluster: Cluster, client: CausalClient, elsewhere: str
) -> None:
    """Master 0 of region a down, its replica not promoted: a client still learns the topology
    at any one node that is up (another master, any other replica: shard 0's copy is out of
    reach, another shard's answers), or given every node with the dead one first; the region's
    other shards go on serving (a down master stops its own shards only); and region b still
    hears from a on the tree (its sink's heartbeats go on: silent, a would have sent b, and
    every region, to timestamp order, which waits for every shard of every region)."""
    t = cluster.topology
    assert metric_sum(cluster, "b", "causal_proxy_tree_mode", region="b") == 1
    up = [address for k, address in enumerate(t.store_endpoints("a")) if k not in (0, MASTERS)]
    for address in up:
        with CausalClient.connect(address, timeout=2.0) as fresh:
            assert set(fresh.regions) == set(t.region_names), address
    with CausalClient.connect(t.store_endpoints("a"), timeout=2.0) as fresh:
        assert fresh.regions["a"].nodes
    assert client.session("a").write("all", elsewhere, {"v": "while-down"}) is not None


@pytest.mark.cluster
def test_a_one_master_cluster_without_replicas_is_formed_and_serves(tmp_path):
    """The smallest cluster (the engine's price on the bench): a lone node knows every node of
    its cluster from the start, and must still be given every slot."""
    topology = load_topology(cluster_topology(shards=2, masters=1, replicas=0))
    address = topology.client_address("a")
    with Cluster(topology, tmp_path / "one") as cluster, CausalClient.connect(address) as client:
        row = unique("one")
        label = client.session("a").write("all", row, {"v": "1"})
        eventually(lambda: client.session("b", label=label).read("all", row).text("v") == "1")
        with node(cluster, "a", 0) as lone:
            assert int(lone.execute_command("CLUSTER", "COUNTKEYSINSLOT", shard_slot(0))) > 0


@pytest.mark.cluster
def test_many_threads_on_one_client_see_only_typed_errors_while_masters_die_and_shards_move(clustered):
    """One client shared by threads, as a threaded web worker or the checker shares it, while
    shards move and masters die and come back: a thread's call may fail, but only with a typed
    ``CausalError`` (a shard's pool was once closed under calls in flight on it when another
    thread followed the shard away, and those died with raw socket errors); and once the faults
    are over every thread's calls succeed again."""
    cluster, _ = clustered
    t = cluster.topology
    raw: list[str] = []
    ok = [0]
    stop = threading.Event()
    rows = [unique("th") for _ in range(24)]

    def work(number: int) -> None:
        session = client.session("a")
        i = 0
        while not stop.is_set():
            i += 1
            row = rows[(number + i) % len(rows)]
            try:
                if i % 3:
                    session.write("all", row, {"v": f"{number}.{i}"})
                else:
                    session.multi_read([ReadSpec("all", row), ReadSpec("all", rows[i % len(rows)])])
                ok[0] += 1
            except CausalError:
                time.sleep(0.01)
            except Exception as exc:  # what the test is for
                raw.append(f"{type(exc).__name__}: {exc}")
                return

    with CausalClient.connect(t.store_endpoints("a"), timeout=2.0) as client:
        threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(12)]
        for thread in threads:
            thread.start()
        try:
            for shard in (0, 1):
                here = master_of(t, "a", shard, None)
                masters = {master_of(t, "a", k, None) for k in range(SHARDS)}
                move_shard(t, "a", shard, next(m for m in sorted(masters) if m != here), None)
                _kill_and_replace_the_master_of(cluster, shard)
            before = ok[0]
            eventually(lambda: ok[0] > before + 100, timeout=20)
        finally:
            stop.set()
            for thread in threads:
                thread.join(scaled(10))
    assert raw == []


def _kill_and_replace_the_master_of(cluster: Cluster, shard: int) -> None:
    """Region a's master of ``shard`` killed and held down until its replica took over, then
    started again (it follows the new master)."""
    t = cluster.topology
    victim = master_of(t, "a", shard, None)
    cluster.kill(f"a.redis{victim}")
    eventually(lambda: master_of(t, "a", shard, None) != victim, timeout=20)
    cluster.restart(f"a.redis{victim}")
    with node(cluster, "a", victim) as back:
        eventually(lambda: back.info("replication").get("master_link_status") == "up", timeout=20)
