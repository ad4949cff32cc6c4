"""The load test end to end, on launched topologies: the one command (both protocols side by side),
Locust against the web apps, and distributed Locust (a master and two workers) on one machine.
Every run must complete with zero failures and non-empty statistics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.deadlines import scaled
from helpers.topologies import free_base_port

from loadtest.cli import main
from loadtest.harness.report import say
from loadtest.workload.locust_run import LocustOptions
from loadtest.workload.plan import Plan, make_plan
from loadtest.workload.run import measure
from services.launcher.cluster import Cluster
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

ROOT = Path(__file__).resolve().parents[1]
USERS = 150


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plan")
    make_plan(Topology.load(ROOT / "topologies" / "demo-3region.toml"), out, USERS, seed=3, max_replicas=2)
    return out


@pytest.fixture(scope="module")
def web_cluster(plan_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The plan's topology under saturn, with the web tier."""
    plan = Plan.load(plan_dir)
    data = {**plan.topology.model_dump(), "protocol": "saturn", "base_port": free_base_port()}
    cluster = Cluster(Topology.from_dict(data), tmp_path_factory.mktemp("run"), web=True).start(
        timeout=scaled(60)
    )
    try:
        yield cluster
    finally:
        cluster.stop()


def operations(summary) -> dict[str, int]:
    return {r.name: r.requests for r in summary.requests if r.kind == summary.kind}


def test_plan_keeps_replicas_within_bounds_and_groups_in_the_topology(plan_dir):
    plan = Plan.load(plan_dir)
    assert plan.graph.users == USERS
    assert all(len(r) == 2 for r in plan.placement.replicas)  # min 2, max 2
    assert set(plan.placement.groups()) <= set(plan.topology.group_members)
    assert set(plan.topology.group_members["all"]) == set(plan.topology.region_names)


def test_one_command_runs_both_protocols_side_by_side(tmp_path, capsys):
    out = tmp_path / "results"
    code = main([
        "run", "--users", str(USERS), "--seed", "3", "--max-replicas", "2", "--protocols", "eventual,saturn",
        "--clients", "6", "--duration", "6", "--mix", "write-heavy", "--out", str(out),
    ])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0, printed[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [r["protocol"] for r in summary["runs"]] == ["eventual", "saturn"]
    for run in summary["runs"]:
        assert run["failed"] == 0 and run["total"] > 100, run
        names = {r["name"] for r in run["requests"] if r["kind"] == "store"}
        assert {"home timeline", "user page", "post", "reply"} <= names
        assert sum(v["updates"] for v in run["visibility"]) > 0  # remote updates became visible
        assert run["migrations"], "placement over 2 of 3 regions makes some reads remote"
        assert any(m["client_mean_ms"] and m["wait_mean_ms"] is not None for m in run["migrations"])
        cpu = run["cpu_us_per_op"]  # every role's CPU per operation, and Locust's own
        assert cpu["redis"] > 0 and cpu["load generator"] > 0 and cpu["bulk-receiver"] > 0, cpu
    assert "serializer" in summary["runs"][1]["cpu_us_per_op"]
    assert "saturn" in summary["ratios"]
    assert (out / "summary.png").stat().st_size > 10_000
    assert (out / "saturn_stats.csv").exists() and (out / "saturn.json").exists()
    assert "Remote-update visibility per region pair" in printed
    assert "CPU per operation by role" in printed and "services, saturn / eventual" in printed
    assert "saturn vs eventual: throughput" in printed


def test_web_target_logs_in_and_browses_without_failures(plan_dir, web_cluster, tmp_path):
    options = LocustOptions("WebUser", clients=6, duration=8, mix="write-heavy", seed=3)
    summary = measure(plan_dir, web_cluster.topology_file, options, tmp_path, say, seed_first=True)
    assert summary.failed == 0, summary.failures
    done = operations(summary)
    assert done.get("log in", 0) >= 6
    assert done.get("home timeline", 0) > 0 and done.get("post", 0) > 0 and done.get("user page", 0) > 0
    assert done.get("search", 0) + done.get("profile edit", 0) + done.get("block", 0) > 0, done  # Chirp's own
    assert summary.migrations, "the web app's sessions migrate for remote pages"


def test_distributed_locust_master_and_two_workers(plan_dir, web_cluster, tmp_path):
    options = LocustOptions("StoreUser", clients=6, duration=6, seed=3, workers=2)
    summary = measure(plan_dir, web_cluster.topology_file, options, tmp_path, say, seed_first=False)
    assert summary.failed == 0, summary.failures
    assert summary.total > 50
    log = (tmp_path / "saturn.log").read_text()
    assert "2 workers connected" in log and "to 2 ready workers" in log, log[-2000:]
