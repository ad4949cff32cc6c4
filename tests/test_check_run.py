"""`python -m loadtest check` end to end: the self-check (under `eventual` on a topology with skewed
latencies the checker finds violations, so a clean run means something), and a minute of
`saturn` under every fault the nemesis knows, which must show none, lose nothing and converge,
with strong operations beside the causal ones, linearizable throughout; and `saturn` on cluster
stores under the faults only they have (a master lost, a shard moved)."""

from __future__ import annotations

import json

import pytest
from helpers.topologies import TOPOLOGIES

from loadtest.check.nemesis import CLUSTER_STORE_FAULTS, FAULTS
from loadtest.cli import main

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def run(tmp_path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out"
    code = main(["check", "--topology", str(TOPOLOGIES / "causality-3region.toml"), "--out", str(out), *args])
    return code, json.loads((out / "check.json").read_text())


def test_the_checker_catches_eventual(tmp_path, capsys):
    code, data = run(tmp_path, "--protocol", "eventual", "--duration", "15")
    assert code == 1
    assert data["violations"]["WriteCORead"] + data["violations"]["WriteCOInitRead"] > 0, data["violations"]
    assert data["violations"]["ThinAirRead"] == 0 and data["violations"]["CyclicCO"] == 0
    assert data["converged"] and not data["lost_writes"]  # eventual converges: it only reorders
    assert "chain:" in capsys.readouterr().out  # an excerpt shows how the read depends on the write
    assert (tmp_path / "out" / "check.png").stat().st_size > 10_000


def test_saturn_under_every_fault(tmp_path):
    """Every fault once (links at 20 Mbit/s through relays, so that one can be congested; two
    shards a region, so that one can be slow; a region outage of 5 s). The
    nemesis waits for a fault to be undone before the next interval starts (a killed process is
    back, a region healthy again), which takes longer on a busy machine: the run leaves room."""
    code, data = run(
        tmp_path, "--protocol", "saturn", "--duration", "56", "--nemesis", "all",
        "--interval", "4", "--fault-seconds", "1.5", "--bandwidth-mbit", "20", "--shards", "2",
        "--outage-seconds", "5",
    )  # fmt: skip
    assert data["violations"] == dict.fromkeys(data["violations"], 0)
    assert not data["lost_writes"] and data["lost_increments"] == data["doubled_increments"] == 0
    assert data["converged"], data["diverged"]
    assert code == 0
    applied = {f["fault"] for f in data["faults"] if not f["note"].startswith("failed")}
    expected = set(FAULTS) - set(CLUSTER_STORE_FAULTS)  # standalone stores (the test below: clusters)
    assert applied == expected, f"faults not applied: {expected - applied}, {data['faults']}"
    assert data["acknowledged"] > 5_000
    assert sum(data["errors"].values()) > 0  # the faults were felt by the clients
    strong = data["linearizability"]  # the strong sessions' registers, under the same faults
    assert strong["ok"] and strong["operations"] > 1_000 and strong["registers"] == 4, strong


def test_saturn_on_cluster_stores_while_masters_die_and_shards_move(tmp_path):
    """Each region's store a Redis Cluster of three masters with a replica each: a master killed
    until its replica took over, then a shard moved between masters, while the workload runs.
    Nothing acknowledged is lost, nothing doubled, no causal or atomicity violation."""
    code, data = run(
        tmp_path, "--protocol", "saturn", "--duration", "24", "--nemesis", ",".join(CLUSTER_STORE_FAULTS),
        "--interval", "6", "--fault-seconds", "1", "--shards", "3", "--cluster-store", "3x1",
        "--strong-sessions", "0",
    )  # fmt: skip
    assert data["violations"] == dict.fromkeys(data["violations"], 0)
    assert not data["lost_writes"] and data["lost_increments"] == data["doubled_increments"] == 0
    assert data["fractured_reads"] == 0 and data["converged"], data["diverged"]
    assert code == 0
    applied = {f["fault"] for f in data["faults"] if not f["note"].startswith("failed")}
    assert applied == set(CLUSTER_STORE_FAULTS), data["faults"]
    assert data["acknowledged"] > 50
