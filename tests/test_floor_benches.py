"""Benches whose tests check a latency only against its floor (never faster than a link's round
trip: load on the machine only adds to it), or only count (reads made, none fractured, a target
missed): unlike tests/test_micro_benches.py, they run beside other test files
(tests/helpers/core_share.py). Tiny sizes: tests of the instruments, not measurements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.deadlines import scaled

from loadtest.bench import fractured, vivace_strong
from loadtest.harness import registry

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_fig4_runs_a_configuration_without_its_tree(tmp_path):
    """P: the seven regions with every serializer killed once running; every proxy then orders
    by timestamp, which waits for the farthest region: far slower than the link Ireland→Frankfurt."""
    assert registry.run("fig4", ["--only", "P", "--quick", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "fig4.json").read_text())
    assert len(rows) == 42 and all(r["updates"] > 0 for r in rows)
    ireland_frankfurt = next(r for r in rows if (r["origin"], r["region"]) == ("ireland", "frankfurt"))
    assert ireland_frankfurt["mean_ms"] > 100  # a 10 ms link
    assert (tmp_path / "fig4-cdf.png").stat().st_size > 0 and (tmp_path / "fig4-pairs.png").stat().st_size > 0


def test_twissandra_on_strong_registers_runs_under_a_flooded_prioritised_link(tmp_path):
    """Vivace's experiment at its smallest: two regions, the link flooded both ways with priority;
    every request kind and the register's operations measured, none failed, each at least a
    round trip (every operation needs both regions)."""
    argv = ["--conditions", "priority", "--requests", "2", "--out", str(tmp_path)]
    assert registry.run("vivace-strong", argv) == 0
    (result,) = vivace_strong.load_results(tmp_path)
    assert result.condition == "priority" and result.errors == 0
    assert set(result.latency) == {*vivace_strong.REQUESTS, *vivace_strong.REGISTER}
    assert all(f.count == 2 and f.p50_ms >= 74 * 0.9 for f in result.latency.values())
    rows, _ = vivace_strong.compare(tmp_path)
    assert any("R1 post, congested with priority" in r[0] for r in rows)


def test_the_page_bench_times_a_page_with_and_without_likes_and_reposts():
    done = subprocess.run(
        [sys.executable, "-m", "loadtest", "bench", "page", "--rounds", "2"],
        capture_output=True, text=True, timeout=scaled(240), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {line.split("  ")[0]: line.split() for line in done.stdout.splitlines() if "  " in line}
    assert float(rows["as served"][-2]) > 0 and rows["as served"][-1] == "1.000"
    assert "no likes and reposts at all" in rows


def test_the_thread_bench_times_a_conversation_and_checks_its_target(tmp_path):
    """A few replies and a short chain (a test of the instrument, not a measurement); an
    impossible target makes it exit 1."""
    argv = [sys.executable, "-m", "loadtest", "bench", "thread", "--replies", "4", "--depth", "2",
            "--rounds", "2", "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(
        [*argv, "--target-ms", "0.001"], capture_output=True, text=True, timeout=scaled(300)
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "a tweet with 4 replies" in done.stdout and "MISSED" in done.stdout
    rows = json.loads((tmp_path / "thread.json").read_text())
    assert [r["page"] for r in rows] == ["replies", "chain"] and all(r["latency"]["p50_ms"] > 0 for r in rows)


def test_the_finding_bench_times_search_a_tag_and_a_profile_with_its_picture(tmp_path):
    """A few tweets (a test of the instrument, not a measurement): every page timed, with its
    budget beside it, and the exit status says whether every median met its budget (which
    this file, sharing the cores, does not ask of the machine: the bench itself is the check)."""
    argv = [sys.executable, "-m", "loadtest", "bench", "finding", "--tweets", "3", "--rounds", "2",
            "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=scaled(300))
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    rows = json.loads((tmp_path / "finding.json").read_text())
    assert [r["page"] for r in rows] == ["search", "tag", "profile", "picture"]
    assert all(r["latency"]["p50_ms"] > 0 for r in rows) and rows[0]["budget_ms"] == 150.0
    missed = [r["page"] for r in rows if r["budget_ms"] and r["latency"]["p50_ms"] > r["budget_ms"]]
    assert done.returncode == (1 if missed else 0), done.stdout[-2000:]
    assert ("MISSED by " + ", ".join(missed) if missed else "budgets: met") in done.stdout


def test_the_fractured_read_bench_counts_reads_and_transactions_never_fracture(capsys):
    assert registry.run("fractured", ["--seconds", "2", "--shards", "2"]) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.startswith(("a ", "b "))}
    assert set(rows) == {"a", "b"}
    assert all(int(r[-4].replace(",", "")) > 0 for r in rows.values()), table  # reads were made
    assert all(r[-3] == "0" for r in rows.values()), f"batches and multi-reads are transactions: {table}"
    spread = fractured.rows_on_distinct_shards(4, 3, "x")
    assert len({fractured.shard_of("all", row, 4) for row in spread}) == 3


def test_the_strong_bench_times_each_kind_of_strong_operation_against_a_majority_round_trip(tmp_path):
    """demo-3region: from frankfurt the closest majority is itself and ireland (20 ms round trip),
    from virginia itself and the nearer of the two (82 ms): no operation can be faster than one."""
    topology = Path(__file__).resolve().parents[1] / "topologies" / "demo-3region.toml"
    assert registry.run("strong", ["--topology", str(topology), "--rounds", "2", "--out", str(tmp_path)]) == 0
    rows = {r["region"]: r for r in json.loads((tmp_path / "strong.json").read_text())}
    assert set(rows) == {"virginia", "ireland", "frankfurt"}
    assert rows["frankfurt"]["majority_rtt_ms"] == 20 and rows["virginia"]["majority_rtt_ms"] == 82
    for row in rows.values():
        assert row["majority_rtt_ms"] * 0.9 <= min(row["write_ms"], row["read_ms"], row["execute_ms"])
