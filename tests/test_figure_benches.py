"""The instruments of the paper's figures and of the transport, reconfiguration and store
scaling benches, end to end on real processes at tiny sizes: every point of every protocol
measured, something counted at each, nothing failed, then the tables, the comparison with the
paper and the plots. They count and never compare a rate or a latency with another, so they run
beside other test files (tests/helpers/core_share.py); the benches that compare run alone,
tests/test_micro_benches.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.bench import fig1, fig5, fig8, store_scaling, transport
from loadtest.bench import synthetic_family as fig5_synthetic
from loadtest.bench.synthetic_family import Mix
from loadtest.harness import registry
from loadtest.harness.report import write_rows
from services.topology import Topology

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_the_transport_bench_runs_its_pairs_with_and_without_tls():
    """Each pair a receiver and a sender process of their own (the receiver's "ready" comes after
    the header every experiment prints); under TLS with certificates made for the run."""
    rows = transport.measure(["link-uvloop", "link-uvloop-tls"], ["one", "pipelined"], 300, 1)
    assert {(r.transport, r.mode) for r in rows} == {
        (t, m) for t in ("link-uvloop", "link-uvloop-tls") for m in ("one", "pipelined")
    }
    assert all(r.median > 0 for r in rows)


def test_the_reconfiguration_bench_measures_every_phase(tmp_path):
    """Three switches of the demo's tree under probe writes: every phase made updates visible,
    and the plot and tables are written."""
    assert registry.run("reconfigure", ["--steady", "0.5", "--rate", "10", "--out", str(tmp_path)]) == 0
    phases = json.loads((tmp_path / "reconfigure.json").read_text())
    assert len(phases) == 7 and all(p["updates"] > 0 and p["extra_ms"] is not None for p in phases)
    assert (tmp_path / "reconfigure.png").stat().st_size > 0


def test_fig5_measures_the_synthetic_workload_per_protocol(tmp_path):
    """Fig. 5's instrument on three regions (tiny: not a measurement): every point of every
    protocol on one cluster each, remote reads through migrations included, then the table, the
    comparison with the paper and the plot."""
    topology = fig5_synthetic.write_topology(
        Topology.load(Path(__file__).resolve().parents[1] / "topologies" / "demo-3region.toml"),
        tmp_path / "topology.toml",
    )
    mixes = [fig5.DEFAULT, Mix(remote_read_fraction=0.4), Mix(correlation="full", value_bytes=512)]
    settings = fig5_synthetic.Settings(clients=1, warmup=0.3, duration=1.0)
    points = []
    for protocol in ("eventual", "saturn", "gentlerain", "cure"):
        points += fig5_synthetic.measure_protocol(protocol, topology, mixes, settings, tmp_path / protocol, 1)
    assert [(p.protocol, p.mix) for p in points] == [
        (q, m) for q in ("eventual", "saturn", "gentlerain", "cure") for m in mixes
    ]
    assert all(p.ops > 0 and p.errors == 0 for p in points), [(p.protocol, p.first_error) for p in points]
    assert all(p.remote_updates > 0 for p in points if p.mix == fig5.DEFAULT)
    assert fig5.ratio(points, "eventual", fig5.DEFAULT) == 1.0
    assert fig5.extra_over_eventual(points, "cure") is not None
    assert "Fig. 5: throughput normalised to eventual" in fig5.table(points)
    write_rows(str(tmp_path), "fig5", points)
    table, verdict = fig5.compare(tmp_path)
    assert table[0][1] == "0.978" and "Targets at the defaults" in verdict
    fig5.plot(points, tmp_path / "fig5.png")
    assert (tmp_path / "fig5.png").stat().st_size > 0


def test_fig8_runs_the_facebook_workload_per_protocol_and_maximum(tmp_path):
    """A plan per maximum of replicas, then the load test under each protocol, normalised to
    eventual (tiny: a test of the instrument on three regions, not a measurement)."""
    topology = Path(__file__).resolve().parents[1] / "topologies" / "demo-3region.toml"
    regions = ("virginia", "ireland", "frankfurt")
    pairs = tuple((a, b) for a in regions for b in regions if a != b)
    points = fig8.measure(
        topology, [2], 200, 4, 3.0, tmp_path, protocols=("eventual", "cure"), cdf_pairs=pairs
    )
    assert [(p.max_replicas, p.protocol) for p in points] == [(2, "eventual"), (2, "cure")]
    assert all(p.ops_per_s > 0 and p.failed == 0 for p in points), [
        (p.protocol, p.ops_per_s, p.failed, p.first_failures) for p in points
    ]
    assert points[0].throughput_ratio == 1.0 and points[0].extra_ms == 0.0
    assert points[1].throughput_ratio is not None and points[1].extra_ms is not None
    fig8.plot(points, tmp_path / "fig8.png")
    assert (tmp_path / "fig8.png").stat().st_size > 0
    # Fig. 8b from the same runs: the pairs' histograms kept, merged over maxima, drawn
    busiest = max(pairs, key=lambda pair: points[1].pairs[fig8.pair_key(*pair)]["updates"])
    updates = {p.protocol: p.pairs[fig8.pair_key(*busiest)]["updates"] for p in points}
    assert all(updates.values()), updates
    histogram = fig8.pair_histogram(points, "cure", *busiest)
    assert histogram.count == updates["cure"] and histogram.cdf_ms()[-1][1] <= 1.0
    link_ms = Topology.load(topology).region_latency_ms(*busiest)
    assert fig8.p90_ms(points, "cure", *busiest) >= link_ms  # never faster than the link
    assert "Fig. 8b" in fig8.cdf_table(points)
    fig8.plot_cdfs(points, tmp_path / "fig8b.png")
    assert (tmp_path / "fig8b.png").stat().st_size > 0


def test_fig1_measures_the_price_of_causality_as_regions_are_added_and_replicas_removed(tmp_path):
    """Fig. 1's instrument, tiny (not a measurement): (a) the first two and three regions of the
    demo, each with a tree of its own, (b) degree 2 on all three; throughput and staleness against
    eventual, then the table, the plot and the comparison."""
    topologies = Path(__file__).resolve().parents[1] / "topologies"
    plan = fig1.Plan(
        base=topologies / "demo-3region.toml",
        partial=topologies / "demo-3region.toml",
        counts=(2, 3),
        degrees=(2,),
        protocols=("eventual", "gentlerain"),
    )
    points = fig1.measure(plan, fig5.Settings(clients=1, warmup=0.5, duration=1.5), 1, tmp_path)
    assert [(p.protocol, p.panel, p.x) for p in points] == [
        (q, panel, x) for q in plan.protocols for panel, x in (("a", 2), ("a", 3), ("b", 2))
    ]
    assert all(p.ops > 0 and p.errors == 0 and p.visibility_ms for p in points)
    assert fig1.throughput_penalty(points, "a", 3, "eventual") == 0.0
    assert fig1.staleness_overhead(points, "b", 2, "gentlerain") is not None
    assert "Fig. 1a" in fig1.table(points) and "Fig. 1b" in fig1.table(points)
    write_rows(str(tmp_path), "fig1", points)
    table, verdict = fig1.compare(tmp_path)
    assert table[0][1] == "small / ≈ -20 / -" and "GentleRain's staleness overhead" in verdict
    fig1.plot(points, tmp_path / "fig1.png")
    assert (tmp_path / "fig1.png").stat().st_size > 0


def test_the_store_scaling_bench_runs_the_facebook_workload_on_a_cluster_store(tmp_path):
    """The instrument, tiny: the load test on two regions whose stores are two-master clusters."""
    base = Topology.load(Path(__file__).resolve().parents[1] / "topologies" / "two-region.toml")
    assert store_scaling.with_masters(base, 4).store.masters == 4
    (point,) = store_scaling.measure(base, [2], "saturn", 100, 2, 4.0, tmp_path)
    assert point.masters == 2 and point.ops_per_s > 0 and point.failed == 0 and point.cores >= 1
