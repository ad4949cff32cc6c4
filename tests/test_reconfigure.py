"""Online reconfiguration (paper §6.2): a running system moves to a new serializer tree under
load. No causal violation (and a naive switch, regions just reconnected to the new tree, does
violate it), nothing lost, nothing applied twice, no fallback to timestamp order."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
import tomli_w
from helpers.clusters import applied_count, metric_sum
from helpers.deadlines import scaled
from helpers.topologies import ROOT, TOPOLOGIES, free_base_port
from helpers.waiting import eventually, unique
from test_saturn_faults import Writer, proxy_mode

from causal_client import CausalClient
from services.launcher import reconfigure
from services.launcher.cluster import Cluster
from services.saturn import epochs
from services.saturn.proxy import NAIVE_RECONFIGURATION_ENV
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def slow_tree_to_c() -> dict:
    """causality-3region with its serializer's link to c 300 ms slower: x's label (a→c) takes
    310 ms on this tree, while on the new one (``fast_tree``) y's label (b→c) takes 10 ms."""
    data = Topology.load(TOPOLOGIES / "causality-3region.toml").model_dump()
    data["tree"] = [{"a": "a", "b": "s-b"}, {"a": "b", "b": "s-b"}, {"a": "c", "b": "s-b", "delay_ms": 300.0}]
    return data


def fast_tree(running: Topology) -> Topology:
    data = running.model_dump()
    data["serializers"] = [{"name": "s-new", "site": "B"}]
    data["tree"] = [{"a": region, "b": "s-new"} for region in "abc"]
    return Topology.from_dict(data)


class CausalRounds:
    """x written in a, read in b, answered by y in b; c must never show y without x, and must
    show y. Runs in a thread until stopped, or until c has not shown a y for ``SHOWN_WITHIN_S``
    (``stuck``: a broken switch can lose a label, as a naive one may); counts rounds and
    violations (a y never shown is one)."""

    SHOWN_WITHIN_S = 30.0

    def __init__(self, client: CausalClient):
        self.a, self.b, self.c = (client.session(r) for r in "abc")
        self.rounds = self.violations = 0
        self.stopping = self.stuck = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stopping:
            x, y = unique("x"), unique("y")
            self.a.write("all", x, {"v": "x"})
            eventually(lambda x=x: self.b.read("all", x), timeout=60, what="x at b")
            self.b.write("all", y, {"v": "y"})
            try:
                # (a probe: under the naive switch y may never show, and that is the finding)
                eventually(lambda y=y: self.c.read("all", y), self.SHOWN_WITHIN_S, what="y at c", probe=True)
            except AssertionError:
                self.violations += 1
                self.stuck = True
                return
            self.violations += not self.c.read("all", x)
            self.rounds += 1

    def start(self) -> CausalRounds:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping = True
        self.thread.join(scaled(120))
        assert not self.thread.is_alive()


def switch_b_first(cluster: Cluster, window_s: float) -> tuple[int, int]:
    """The new tree starts; b's sink moves to it first, a's only ``window_s`` later: every round
    in between has x's label on the old tree and y's on the new one. Returns the rounds played
    in that window (at least one) and the violations seen overall."""
    old = cluster.topology
    new = reconfigure.start_tree(cluster, fast_tree(old), timeout=scaled(30))
    client = CausalClient.connect(cluster.topology.client_address("a"))
    try:
        rounds = CausalRounds(client).start()
        eventually(lambda: rounds.rounds >= 2, timeout=30)  # all on the old tree
        epochs.publish(new, regions=["b"])  # b's sink sends on the new tree, a's not yet
        eventually(lambda: epochs.progress(new)["b"]["sink"] == new.epoch, timeout=10)
        before = rounds.rounds
        time.sleep(window_s)  # the window (a fixed time): x's label on the old tree, y's on the new
        epochs.publish(new, regions=["a", "c"])
        reconfigure.wait_moved(new, timeout=scaled(30))
        eventually(lambda: rounds.rounds >= before + 3 or rounds.stuck, timeout=60)  # some on the new tree
        rounds.stop()
    finally:
        client.close()
    reconfigure.finish(cluster, old, new, timeout=scaled(30))
    return rounds.rounds - before, rounds.violations


def test_switch_keeps_causality_where_a_naive_switch_breaks_it(launch, monkeypatch):
    cluster = launch(slow_tree_to_c())
    played, violations = switch_b_first(cluster, window_s=1.5)
    assert played >= 1
    assert violations == 0, f"{violations} rounds showed y without x across the switch, or never showed y"
    assert proxy_mode(cluster, "c") == 1  # the switch never fell back to timestamp order
    assert cluster.topology.epoch == 1 and "serializer.s-b" not in cluster.processes

    monkeypatch.setenv(NAIVE_RECONFIGURATION_ENV, "1")  # processes started from here on
    naive = launch(slow_tree_to_c())
    played, violations = switch_b_first(naive, window_s=1.5)
    assert violations >= 1, f"a naive switch broke no causality in {played} rounds: the test cannot fail"


def test_switch_under_a_stream_of_writes_loses_and_doubles_nothing(launch, client_for):
    cluster = launch("causality-3region.toml")
    client = client_for(cluster)
    reader = client.session("c")
    before = metric_sum(cluster, "c", "causal_remote_updates_applied_total", region="c", origin="a")
    writer = Writer(client, 3000).start()
    eventually(lambda: writer.done >= 100, timeout=60)
    reconfigure.reconfigure(cluster, fast_tree(cluster.topology), timeout=scaled(30), report=print)
    assert writer.done < writer.n, "the switch must land in the middle of the stream"
    writer.thread.join(scaled(120))
    eventually(lambda: len(reader.read("all", writer.row)) == writer.n, timeout=60)
    row = reader.read("all", writer.row)
    assert [c.column for c in row] == [f"u{i:05d}" for i in range(writer.n)]
    eventually(lambda: reader.read("all", writer.row + ":n").counter("count") >= writer.n, timeout=30)
    assert reader.read("all", writer.row + ":n").counter("count") == writer.n  # each increment once
    applied = applied_count(cluster, "c", "a", at_least=2 * writer.n, before=before)
    assert applied == 2 * writer.n, "every update applied exactly once at c"
    for region in "bc":
        assert proxy_mode(cluster, region) == 1
        assert metric_sum(cluster, region, "causal_proxy_tree_epoch", region=region) == 1
    # And back to a tree like the first: epochs go on, odd and even trees take turns on ports.
    back = reconfigure.reconfigure(
        cluster, Topology.load(TOPOLOGIES / "causality-3region.toml"), timeout=scaled(30)
    )
    assert back.epoch == 2 and sorted(cluster.processes) == sorted(cluster.specs)
    x = unique("after")
    client.session("a").write("all", x, {"v": "1"})
    eventually(lambda: reader.read("all", x), timeout=10)


def test_reconfigure_refuses_other_regions(launch):
    cluster = launch("causality-3region.toml")
    other = Topology.load(TOPOLOGIES / "two-region.toml")
    with pytest.raises(ValueError, match="regions"):
        reconfigure.reconfigure(cluster, other, timeout=scaled(10))
    assert cluster.topology.epoch == 0


def test_command_line_reconfigures_a_running_launcher(tmp_path):
    """`up` in one process, `reconfigure NEW.toml` in another: the running launcher switches."""
    data = Topology.load(TOPOLOGIES / "causality-3region.toml").model_dump()
    data["base_port"] = free_base_port()
    running = Topology.from_dict(data)
    (tmp_path / "old.toml").write_text(_toml(running))
    (tmp_path / "new.toml").write_text(_toml(fast_tree(running)))
    run_dir = tmp_path / "run"
    launcher = [sys.executable, "-m", "services.launcher", "--run-dir", str(run_dir)]
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen([*launcher, "up", str(tmp_path / "old.toml")], cwd=ROOT, stdout=log, stderr=log)
    try:
        eventually(lambda: (run_dir / "state.json").exists(), timeout=60)
        done = subprocess.run(
            [*launcher, "reconfigure", str(tmp_path / "new.toml"), "--timeout", f"{scaled(30):.0f}"],
            cwd=ROOT, capture_output=True, text=True, timeout=scaled(120),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "done in" in done.stdout
        assert "serializer.e1.s-new" in (run_dir / "state.json").read_text()
    finally:
        up.terminate()
        up.wait(scaled(30))
        log.close()


def _toml(topology: Topology) -> str:
    return tomli_w.dumps(topology.model_dump(exclude_none=True))
