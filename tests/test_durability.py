"""Durable stores: a Redis killed with SIGKILL comes back with every write it acknowledged (AOF,
``appendfsync always``), and replication resumes from the durable positions, losing and doubling
nothing; data outlives the cluster too, for a topology of the same shape."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.deadlines import scaled
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import CausalClient, CausalError
from services.launcher.cluster import Cluster, LaunchError

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


class RetryingWriter:
    """Writes n updates at one region, each a distinct column and +1 on a counter, retrying a
    write that failed (the store is down) until it is acknowledged. A failed increment may still
    have been applied (the store died before its reply), so those are counted apart."""

    def __init__(self, client: CausalClient, region: str, n: int):
        self.session = client.session(region)
        self.n, self.row, self.done, self.errors = n, unique("durable"), 0, 0
        self.acked_increments = self.unsure_increments = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def retry(self, action) -> bool:
        """True once acknowledged; False for each failure (then it is tried again)."""
        try:
            action()
            return True
        except CausalError:
            self.errors += 1
            time.sleep(0.02)
            return False

    def run(self) -> None:
        for i in range(self.n):
            while not self.retry(lambda i=i: self.session.write("all", self.row, {f"u{i:05d}": str(i)})):
                pass
            while not self.retry(lambda: self.session.increment("all", self.row + ":n", "count", 1)):
                self.unsure_increments += 1
            self.acked_increments += 1
            self.done = i + 1

    def start(self) -> RetryingWriter:
        self.thread.start()
        return self


@pytest.mark.parametrize(
    ("protocol", "victim"),
    [("eventual", "a.redis0"), ("saturn", "a.redis0"), ("saturn", "c.redis0")],
)
def test_a_killed_store_comes_back_with_every_acknowledged_write(launch, client_for, protocol, victim):
    """SIGKILL of the writing region's store (a) or of a replica's (c) in the middle of a stream of
    writes: everything acknowledged is there after the restart, in every region, exactly once."""
    cluster = launch("causality-3region.toml", protocol=protocol)
    client = client_for(cluster)
    writer = RetryingWriter(client, "a", 400).start()
    eventually(lambda: writer.done >= 100, timeout=60)
    cluster.kill(victim)
    time.sleep(0.3)  # down a while, a fixed time: the writer meets the dead store and retries
    cluster.restart(victim)
    writer.thread.join(scaled(120))
    assert writer.done == writer.n
    for region in ("a", "b", "c"):
        reader = client.session(region)
        eventually(lambda r=reader: len(r.read("all", writer.row)) == writer.n, timeout=60)
        row = reader.read("all", writer.row)
        assert [c.column for c in row] == [f"u{i:05d}" for i in range(writer.n)]
        assert all(c.text == str(int(c.column[1:])) for c in row)
        # The counter is another row, written after each column: its last increment may still
        # be on its way when the row is complete.
        counter = writer.row + ":n"
        eventually(lambda r=reader, k=counter: r.read("all", k).counter("count") >= writer.n, timeout=60)
        count = reader.read("all", counter).counter("count")
        assert writer.n <= count <= writer.n + writer.unsure_increments, region


def test_data_outlives_the_cluster_for_the_same_shape_only(tmp_path, client_for):
    topology = load_topology("two-region.toml")
    row = unique("kept")
    with Cluster(topology, tmp_path) as cluster:
        client_for(cluster).session("a").write("all", row, {"v": "1"})
    with Cluster(topology, tmp_path) as cluster:  # stopped and started again: still there
        client = client_for(cluster)
        assert client.session("a").read("all", row).text("v") == "1"
        # stopped right after the write: replication resumes where it was, b gets it now
        eventually(lambda: client.session("b").read("all", row).text("v") == "1")
    other = load_topology("two-region.toml", protocol="saturn", base_port=topology.base_port)
    with pytest.raises(LaunchError, match="holds the data of a different topology"):
        Cluster(other, tmp_path).start()
    cluster = Cluster(topology, tmp_path).start(fresh=True)
    try:
        assert len(client_for(cluster).session("a").read("all", row)) == 0
    finally:
        cluster.stop()
