"""Benches whose tests check what was counted and in what order (every label, every update,
no acknowledged write lost, one winner per name, the paper's fig7 structure and its comparison),
never a rate or a latency against another: so, unlike tests/test_micro_benches.py, they run
beside other test files (tests/helpers/core_share.py). Tiny sizes: tests of the instruments, not
measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.bench import proxy, serializer
from loadtest.cli import main as loadtest_main
from loadtest.harness import registry
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_the_serializer_bench_counts_every_label_through_a_real_serializer():
    rows = serializer.run_batches([1, 10], 200)
    assert [r.batch for r in rows] == [1, 10]
    assert all(r.labels == 200 and r.labels_per_s > 0 and r.cpu_us_per_label >= 0 for r in rows)


def test_the_proxy_bench_sees_every_update_made_visible_by_a_real_proxy():
    """Each row ends only once region b's watermark for a has passed the last label sent."""
    rows = proxy.run_batches([1, 10], 200)
    assert [r.batch for r in rows] == [1, 10]
    assert all(r.updates == 200 and r.updates_per_s > 0 and r.receiver_us_per_update >= 0 for r in rows)


def test_the_failover_bench_kills_the_primary_with_and_without_replicas(tmp_path):
    assert registry.run("failover", ["--phase", "1", "--rate", "10", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "failover.json").read_text())
    assert [(r["replicas"], r["phase"]) for r in rows] == [
        (n, phase) for n in (1, 2) for phase in ("steady", "primary killed", "restarted")
    ]
    assert all(r["updates"] > 0 for r in rows)


def test_the_paper_command_runs_fig7_and_sets_the_papers_numbers_beside_ours(tmp_path):
    """`python -m loadtest paper fig7 --quick`: the four protocols under the synthetic workload on
    the seven regions, each measured at a share of the capacity it showed first (paced clients
    do not exceed it), every update's visibility counted, and a comparison with the paper's
    figures written."""
    assert loadtest_main(["paper", "fig7", "--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fig7" / "fig7.json").read_text())
    protocols = {r["configuration"] for r in rows}
    assert protocols == {"eventual", "saturn", "gentlerain", "cure"}
    for load in json.loads((tmp_path / "fig7" / "fig7-load.json").read_text()):
        assert load["offered_ops_per_s"] == pytest.approx(0.85 * load["capacity_ops_per_s"])
        assert 0 < load["measured_ops_per_s"] < 1.1 * load["offered_ops_per_s"]  # paced: never above
        assert load["shards"] == 2 and load["errors"] == 0 and load["cpu_us_by_role"]["bulk-receiver"] > 0
    for protocol in protocols:  # a few seconds at a slow protocol's capacity: a few dozen updates
        assert sum(r["updates"] for r in rows if r["configuration"] == protocol) > 0
    comparison = (tmp_path / "fig7" / "comparison.md").read_text()
    assert "| Saturn extra over eventual, mean over updates (ms) | 7.3 |" in comparison
    assert "the order Saturn < Cure < GentleRain" in comparison
    assert (tmp_path / "fig7" / "fig7-cdf.png").stat().st_size > 0
    # The visibility budget: Saturn's sampled updates timed at every stage of their path.
    budgets = [b for b in json.loads((tmp_path / "fig7" / "fig7-budget.json").read_text()) if b["sampled"]]
    saturn = [b for b in budgets if b["protocol"] == "saturn"]
    assert saturn and (tmp_path / "fig7" / "fig7-budget.png").stat().st_size > 0
    tree = Topology.load(Path(__file__).resolve().parents[1] / "topologies" / "ec2-7region-mx.toml")
    for b in saturn:
        assert b["tree_lag_ms"] == pytest.approx(tree.tree_path_ms(b["origin"], b["region"]))
        assert [h["a"] for h in b["hops"]][:1] == [b["origin"]] and b["hops"][-1]["b"] == b["region"]
    # Every stage of a pair is timed for the same sampled updates, but a quick window sees few
    # of them, and a pair's may straddle its edges (visible inside, sent before it: far regions'
    # clients spend seconds migrating): some pair has every stage, and its label paid the lag.
    whole = [b for b in saturn if b["sent_ms"] is not None and None not in [h["taken_ms"] for h in b["hops"]]]
    assert whole and all(b["label_ms"] > b["tree_lag_ms"] for b in whole)
    cure = [b for b in budgets if b["protocol"] == "cure"]  # no label; its payload timed where seen
    assert cure and all(b["label_ms"] is None for b in cure)
    assert any(b["payload_ms"] is not None for b in cure)  # (a pair's one update may straddle an edge)


def test_fig7_keeps_its_probe_writes_as_an_option(tmp_path):
    """`bench fig7 --load probes`: paced probe writes to an all-replicated group, every pair."""
    out = tmp_path / "probes"
    argv = ["bench", "fig7", "--quick", "--load", "probes", "--only", "eventual", "--out", str(out)]
    assert loadtest_main(argv) == 0
    rows = json.loads((out / "fig7.json").read_text())
    assert len(rows) == 42 and all(r["updates"] > 0 for r in rows)


def test_name_races_have_one_winner_with_a_region_killed_and_unknown_outcomes(tmp_path):
    """Sixty names raced from the three regions at once, a third of the calls ending unknown and
    one region's store killed for the middle third: no name with two winners, no disagreement,
    no takeover, no account of the wrong token; the killed region's racers failed."""
    argv = ["--races", "60", "--kill", "--unknown", "0.3", "--out", str(tmp_path)]
    assert registry.run("name-races", argv) == 0
    (tally,) = json.loads((tmp_path / "name_races.json").read_text())
    assert tally["races"] == 60 and tally["killed"] and tally["failed_racers"] > 0
    assert tally["injected_unknown"] > 10
    assert tally["two_winners"] == tally["disagreeing"] == tally["takeovers"] == tally["wrong_accounts"] == 0


def test_the_replica_ack_bench_waits_for_a_real_replica(tmp_path):
    """Every variant writes through the store's gear; with WAIT each write came back replicated."""
    assert loadtest_main(["bench", "replica-ack", "--writes", "40", "--clients", "2", "--rounds", "1",
                          "--out", str(tmp_path)]) == 0  # fmt: skip
    rows = json.loads((tmp_path / "replica-ack.json").read_text())
    assert [(r["variant"], r["clients"]) for r in rows] == [
        (variant, clients)
        for clients in (2,)
        for variant in ("alone", "replica, ack at once", "replica, WAIT 1")
    ]
    assert all(r["writes"] == 40 and r["writes_per_s"] > 0 and r["unacked"] == 0 for r in rows)


def test_the_store_restart_bench_kills_a_store_and_loses_no_acknowledged_write(tmp_path):
    assert loadtest_main(["bench", "store-restart", "--preload", "200", "--around", "0.3",
                          "--out", str(tmp_path)]) == 0  # fmt: skip
    (row,) = json.loads((tmp_path / "store-restart.json").read_text())
    assert row["preload"] == 200 and row["aof_bytes"] > 0 and row["lost"] == 0
    assert 0 < row["unavailable_s"] < 30 and row["failed_writes"] > 0, "the store was down a while"


def test_the_store_failover_bench_kills_a_master_for_good_and_loses_no_acknowledged_write(tmp_path):
    assert loadtest_main(["bench", "store-failover", "--node-timeout", "500", "--around", "0.3",
                          "--out", str(tmp_path)]) == 0  # fmt: skip
    (row,) = json.loads((tmp_path / "store-failover.json").read_text())
    assert row["node_timeout_ms"] == 500 and row["lost"] == 0 and row["acknowledged"] > 0
    assert 0.5 < row["unavailable_s"] < 30 and row["failed_writes"] > 0, "the shard was down a while"
