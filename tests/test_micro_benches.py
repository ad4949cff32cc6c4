"""The micro-benchmarks of one serializer and one remote proxy run end to end on real processes
and report what they measured (tiny sizes: a test of the instruments, not a measurement; CPU is
read from /proc in clock ticks, 10 ms, so at these sizes it may read zero)."""

from __future__ import annotations

import json

from loadtest.bench import proxy, reconfigure, serializer


def test_the_serializer_bench_counts_every_label_through_a_real_serializer():
    rows = serializer.run([1, 10], 200)
    assert [r.batch for r in rows] == [1, 10]
    assert all(r.labels == 200 and r.labels_per_s > 0 and r.cpu_us_per_label >= 0 for r in rows)


def test_the_proxy_bench_sees_every_update_made_visible_by_a_real_proxy():
    """Each row ends only once region b's watermark for a has passed the last label sent."""
    rows = proxy.run([1, 10], 200)
    assert [r.batch for r in rows] == [1, 10]
    assert all(r.updates == 200 and r.updates_per_s > 0 and r.receiver_us_per_update >= 0 for r in rows)


def test_the_reconfiguration_bench_measures_every_phase(tmp_path):
    """Three switches of the demo's tree under probe writes: every phase made updates visible,
    and the plot and tables are written."""
    assert reconfigure.main(["--steady", "0.5", "--rate", "10", "--out", str(tmp_path)]) == 0
    phases = json.loads((tmp_path / "reconfigure.json").read_text())
    assert len(phases) == 7 and all(p["updates"] > 0 and p["extra_ms"] is not None for p in phases)
    assert (tmp_path / "reconfigure.png").stat().st_size > 0
