"""The benchmark command: percentile estimation, /metrics parsing, and a quick real run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.topologies import TOPOLOGIES, free_base_port
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Histogram as PromHistogram

from loadtest.bench.compare import comparison
from loadtest.harness import registry
from loadtest.harness.budget import STAGE_METRIC, parse_stages
from loadtest.harness.metrics import lines_of, parse_visibility
from loadtest.harness.results import OPS, PhaseResult, ProtocolRun, VisibilityRow
from loadtest.harness.stats import Histogram, percentile
from services import metrics
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

INF = math.inf


def synthetic() -> Histogram:
    """10 observations in (0, 10 ms], 20 in (10, 20 ms], 10 in (20, 50 ms], none above."""
    return Histogram(((0.01, 10), (0.02, 30), (0.05, 40), (INF, 40)), sum=0.8, count=40)


def test_histogram_quantiles_interpolate_linearly_inside_the_bucket():
    h = synthetic()
    assert h.quantile(0.1) == pytest.approx(0.004)  # rank 4 of 10 in (0, 10 ms]
    assert h.quantile(0.25) == pytest.approx(0.010)  # rank 10: the top of the first bucket
    assert h.quantile(0.5) == pytest.approx(0.015)  # rank 20: half-way through (10, 20 ms]
    assert h.quantile(0.9) == pytest.approx(0.038)  # rank 36: 6 of 10 into (20, 50 ms]
    assert h.quantile(1.0) == pytest.approx(0.050)
    assert h.mean == pytest.approx(0.02)


def test_histogram_quantile_in_the_inf_bucket_is_the_highest_finite_bound():
    h = Histogram(((0.01, 10), (0.02, 30), (INF, 40)), sum=1.0, count=40)
    assert h.quantile(0.9) == pytest.approx(0.02)


def test_empty_histogram_has_no_quantiles():
    h = Histogram(((0.01, 0), (INF, 0)))
    assert h.quantile(0.5) is None and h.mean is None


def test_histogram_difference_is_what_was_observed_in_between():
    earlier = Histogram(((0.01, 10), (0.02, 10), (0.05, 10), (INF, 10)), sum=0.05, count=10)
    between = synthetic().minus(earlier)
    assert between.count == 30 and between.sum == pytest.approx(0.75)
    assert between.buckets == ((0.01, 0), (0.02, 20), (0.05, 30), (INF, 30))
    assert between.quantile(0.5) == pytest.approx(0.0175)  # rank 15 of 20 in (10, 20 ms]


def test_sample_percentiles():
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.99) == pytest.approx(3.97)
    assert percentile([], 0.5) is None


def test_parses_the_services_visibility_histogram_from_metrics_text():
    (family,) = metrics.VISIBILITY.describe()
    registry = CollectorRegistry()
    histogram = PromHistogram(
        family.name, "test", ["region", "origin"], buckets=metrics.VISIBILITY_BUCKETS, registry=registry
    )
    for i in range(100):  # uniform in [41, 44) ms
        histogram.labels("ireland", "virginia").observe(0.041 + 0.003 * i / 100)
    histogram.labels("virginia", "ireland").observe(0.2)

    parsed = parse_visibility(generate_latest(registry).decode())

    assert set(parsed) == {("virginia", "ireland"), ("ireland", "virginia")}  # (origin, region)
    to_ireland = parsed["virginia", "ireland"]
    assert to_ireland.count == 100
    assert to_ireland.mean == pytest.approx(0.0425, abs=1e-4)
    assert 0.040 < to_ireland.quantile(0.5) <= 0.045  # inside the (40, 45 ms] bucket
    assert parsed["ireland", "virginia"].count == 1


def test_a_page_with_other_histograms_parses_to_each_metrics_own():
    """A region's page also holds the label stages' histograms (thousands of lines): each parser
    reads only its metric's lines, and finds all of them."""
    registry = CollectorRegistry()
    (family,) = metrics.VISIBILITY.describe()
    buckets = (0.01, 0.1)
    visibility = PromHistogram(family.name, "v", ["region", "origin"], buckets=buckets, registry=registry)
    stage = PromHistogram(STAGE_METRIC, "s", ["node", "origin", "stage"], buckets=buckets, registry=registry)
    visibility.labels("ireland", "virginia").observe(0.05)
    for node in ("ireland", "s-i", "s-nv"):
        stage.labels(node, "virginia", "in").observe(0.005)
    page = generate_latest(registry).decode()

    assert lines_of(page, family.name).count("\n") < page.count("\n") // 2
    assert parse_visibility(page)["virginia", "ireland"].count == 1
    stages = parse_stages(page)
    assert set(stages) == {(node, "virginia", "in") for node in ("ireland", "s-i", "s-nv")}
    assert all(h.count == 1 for h in stages.values())


def test_bench_runs_end_to_end_on_two_regions(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = registry.run("throughput", [
        "--topology", str(TOPOLOGIES / "two-region.toml"), "--base-port", str(free_base_port()),
        "--clients", "2", "--duration", "1", "--warmup", "0.2", "--keys", "50",
        "--probe-writes", "40", "--probe-rate", "200", "--idle", "0.5", "--out", str(tmp_path),
    ])  # fmt: skip

    assert code == 0
    results = json.loads((tmp_path / "two-region.json").read_text())
    assert results["errors"] == {}
    (run,) = results["runs"]
    assert run["protocol"] == "eventual"
    phases = {(p["system"], p["op"]): p for p in run["throughput"]}
    assert set(phases) == {(system, op) for system in ("causal", "raw") for op in OPS}
    for phase in phases.values():
        assert phase["ops_per_s"] > 0 and phase["errors"] == 0 and phase["p99_ms"] >= phase["p50_ms"] > 0
    assert all(ratio > 0 for ratio in run["ratios"].values())
    for op in OPS:  # CPU of every process in the window, by role, and of the load region
        causal = phases[("causal", op)]
        assert causal["total_cpu_us_per_op"] > 0 and causal["cpu_us_per_op"]["redis"] > 0
        assert 0 < causal["region_cpu_us_per_op"] < causal["total_cpu_us_per_op"]
    assert set(run["idle_cpu_cores"]) >= {"a.frontend0", "b.bulk-receiver"}

    pairs = {(row["origin"], row["region"]): row for row in run["visibility"]}
    assert set(pairs) == {("a", "b"), ("b", "a")}
    for row in pairs.values():
        assert row["updates"] >= 40
        assert row["configured_ms"] == 20
        # Nothing crosses the emulated link faster than its latency.
        assert row["mean_ms"] >= row["configured_ms"] and row["p99_ms"] >= row["p50_ms"] > 0
    assert [(r["origin"], r["region"]) for r in run["visibility_under_load"]] == [("a", "b")]
    assert run["missing_updates"] == {}
    assert (tmp_path / "two-region.png").stat().st_size > 0

    out = capsys.readouterr().out
    assert "causal/raw" in out and "a -> b" in out and "b -> a" in out
    assert f"wrote {tmp_path / 'two-region.json'}" in out


def test_cpu_is_attributed_to_roles_and_regions_by_process_name():
    from loadtest.harness.cpu import CLIENT_ROLE, by_role, of_region, region_of, role_of, used_between

    assert role_of("virginia.frontend0") == "frontend" and role_of("ireland.redis1") == "redis"
    assert role_of("serializer.s-eu") == "serializer" and role_of("a.label-sink") == "label-sink"
    assert region_of("virginia.frontend0") == "virginia"
    assert region_of("serializer.s-eu") is None and region_of(CLIENT_ROLE) is None
    cpu = {"a.frontend0": 1.0, "a.frontend1": 0.5, "b.redis0": 0.25, "serializer.s": 2.0, CLIENT_ROLE: 4.0}
    assert by_role(cpu) == {"frontend": 1.5, "redis": 0.25, "serializer": 2.0, CLIENT_ROLE: 4.0}
    assert of_region(cpu, "a") == 1.5 and of_region(cpu, "c") == 0
    assert used_between({"a.x": 1.0, "gone.y": 3.0}, {"a.x": 1.5, "new.z": 9.0}) == {"a.x": 0.5}


FORKING_WORKER = """
import os, sys, time
pid = os.fork()
if pid == 0:  # a forked worker, as gunicorn's and Celery's are: burn 0.3 s of CPU, then exit
    while sum(os.times()[:2]) < 0.3:
        pass
    os._exit(0)
os.waitpid(pid, 0)  # reaped: its CPU is now in this process's children's figures
print("worker done", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="CPU figures come from /proc")
def test_cpu_of_a_process_includes_its_forked_workers():
    import subprocess
    import sys

    from loadtest.harness.cpu import CLIENT_ROLE, CpuMeter, cpu_seconds

    server = subprocess.Popen([sys.executable, "-c", FORKING_WORKER], stdout=subprocess.PIPE, text=True)
    try:
        meter = CpuMeter({"a.web": server.pid})
        assert server.stdout is not None and server.stdout.readline() == "worker done\n"
        snapshot = meter.snapshot()
        assert snapshot["a.web"] >= 0.3 > (cpu_seconds(server.pid) or 0.0) + 0.2
        assert CLIENT_ROLE in snapshot  # the measuring process itself, without its children
    finally:
        server.kill()
        server.wait()


def test_the_baselines_run_on_the_same_bench(tmp_path: Path):
    """GentleRain and Cure are measured like any protocol: same phases, every probe visible."""
    code = registry.run("throughput", [
        "--topology", str(TOPOLOGIES / "two-region.toml"), "--base-port", str(free_base_port()),
        "--protocols", "gentlerain,cure", "--clients", "2", "--duration", "0.5", "--warmup", "0.1",
        "--probe-writes", "20", "--probe-rate", "200", "--idle", "0.2", "--out", str(tmp_path),
    ])  # fmt: skip

    assert code == 0
    results = json.loads((tmp_path / "two-region.json").read_text())
    assert results["errors"] == {}
    assert [run["protocol"] for run in results["runs"]] == ["gentlerain", "cure"]
    for run in results["runs"]:
        assert run["missing_updates"] == {}
        rows = run["visibility"]
        assert rows and all(r["updates"] >= 20 and r["mean_ms"] >= r["configured_ms"] for r in rows)


def test_unknown_protocol_is_refused_before_starting_anything(tmp_path: Path):
    code = registry.run(
        "throughput", ["--topology", str(TOPOLOGIES / "two-region.toml"), "--protocols", "nope"]
    )
    assert code == 2


def test_protocol_variants_name_their_environment_and_topology(capsys: pytest.CaptureFixture[str]):
    from loadtest.harness.variants import Variant, split_variant

    assert split_variant("saturn") == ("saturn", Variant())
    assert split_variant("saturn+serial") == ("saturn", Variant(env={"SATURN_CONCURRENT_APPLY": "0"}))
    assert split_variant("eventual+everysec") == ("eventual", Variant(topology={"appendfsync": "everysec"}))
    code = registry.run(
        "throughput", ["--topology", str(TOPOLOGIES / "two-region.toml"), "--protocols", "saturn+bogus"]
    )
    assert code == 2
    assert "unknown variant 'bogus'" in capsys.readouterr().err


def _run(protocol: str, round_: int, write_ops_s: float, mean_ms: float) -> ProtocolRun:
    run = ProtocolRun(protocol, "a", round=round_)
    for op in OPS:
        run.phases.append(PhaseResult("causal", op, 8, 10.0, int(write_ops_s * 10), 0, write_ops_s, 1, 1, 1))
    row = VisibilityRow("a", "b", 100, 20.0, mean_ms, mean_ms, mean_ms + 2, mean_ms + 4)
    run.visibility_probe.append(row)
    return run


def test_comparison_over_rounds_uses_medians():
    """Three alternating rounds: one noisy outlier per protocol does not move the ratio."""
    topology = Topology.load(TOPOLOGIES / "two-region.toml")
    runs = [
        _run("eventual", 0, 1000, 22.0), _run("saturn", 0, 950, 25.0),
        _run("saturn", 1, 400, 60.0), _run("eventual", 1, 1010, 23.0),
        _run("eventual", 2, 1500, 21.0), _run("saturn", 2, 960, 26.0),
    ]  # fmt: skip
    result = comparison(topology, runs)
    assert result is not None and result["rounds"] == 3
    write = result["protocols"]["saturn"]["throughput"]["write"]
    assert write["baseline_ops_s"] == 1010 and write["ops_s"] == 950
    assert write["ratio"] == pytest.approx(950 / 1010)
    assert write["rounds"] == [950, 400, 960]
    (pair,) = result["protocols"]["saturn"]["visibility"]
    assert pair["mean_ms"] == 26.0 and pair["baseline_mean_ms"] == 22.0
    assert pair["extra_mean_ms"] == pytest.approx(4.0)


@pytest.mark.parametrize("protocol", ["saturn", "eventual"])
def test_resume_bench_times_every_path_and_counts_lost_writes(protocol, capsys):
    """`python -m loadtest bench resume`: one round per path; under saturn no resumed session
    misses its write (exit 0), under eventual the one resumed while x is in flight does."""

    status = registry.run("resume", ["--rounds", "2", "--protocol", protocol])
    out = capsys.readouterr().out
    rows = {line[:37].strip(): line.split()[-1] for line in out.splitlines() if line.endswith("/2")}
    assert set(rows) == {
        "own region, token", "elsewhere, token (migration)",
        "elsewhere, bare label (stabilization)", "elsewhere, token, x in flight",
    }  # fmt: skip
    if protocol == "saturn":
        assert status == 0 and set(rows.values()) == {"0/2"}
    else:
        assert rows["elsewhere, token, x in flight"] != "0/2"


def test_fig8_gives_the_median_over_rounds_and_the_ratio_of_medians():
    from loadtest.bench import fig8

    def point(protocol: str, ops: float, seen: float, round_: int) -> fig8.Point:
        return fig8.Point(2, protocol, ops, None, seen, None, 0, {}, round_)

    rounds = [point("eventual", 100, 80, 1), point("saturn", 90, 95, 1),
              point("eventual", 120, 82, 2), point("saturn", 100, 97, 2),
              point("eventual", 110, 81, 3), point("saturn", 99, 96, 3)]  # fmt: skip
    eventual, saturn = fig8.medians(rounds)
    assert (eventual.ops_per_s, eventual.throughput_ratio, eventual.extra_ms) == (110, 1.0, 0.0)
    assert saturn.ops_per_s == 99 and saturn.throughput_ratio == 0.9 and saturn.extra_ms == 15
    assert "median over 3 rounds" in fig8.table(rounds)
