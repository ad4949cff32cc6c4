"""The live causality page's data: frames made from two scrapes of the regions' metrics, and the
tree's layout (no cluster: metrics text as the services serve it)."""

from __future__ import annotations

from itertools import pairwise

from helpers.topologies import load_topology

from webapp.causality_feed import Counts, baseline, frame, layout, parse, tree_path


def metrics(applied: float, seen: float, spent_s: float, sent: float = 0) -> str:
    return f"""# TYPE causal_remote_updates_applied_total counter
causal_remote_updates_applied_total{{origin="ireland",region="virginia"}} {applied}
# TYPE causal_visibility_seconds histogram
causal_visibility_seconds_bucket{{le="+Inf",origin="ireland",region="virginia"}} {seen}
causal_visibility_seconds_count{{origin="ireland",region="virginia"}} {seen}
causal_visibility_seconds_sum{{origin="ireland",region="virginia"}} {spent_s}
# TYPE causal_labels_sent_total counter
causal_labels_sent_total{{region="virginia",type="update"}} {sent}
"""


def test_a_frame_is_the_difference_of_two_scrapes():
    before = {"virginia": parse(metrics(10, 10, 0.5, sent=3))}
    now = {"virginia": parse(metrics(14, 14, 0.7, sent=5)), "ireland": Counts(up=False)}
    shown = frame(before, now)
    pair = shown["pairs"]["ireland>virginia"]
    assert pair["applied"] == 4 and pair["total"] == 14
    assert pair["visibility_ms"] == 50.0  # 0.2 s over 4 updates
    assert pair["mean_ms"] == 50.0
    assert shown["regions"]["virginia"] == {"up": True, "sent": 2}
    assert shown["regions"]["ireland"]["up"] is False
    quiet = frame(now, now)["pairs"]["ireland>virginia"]
    assert quiet["applied"] == 0 and quiet["visibility_ms"] is None


def test_a_scrape_that_failed_leaves_the_last_good_one_as_the_baseline():
    good = {"virginia": parse(metrics(10, 10, 0.5))}
    failed = {"virginia": Counts(up=False)}
    after = baseline(good, failed)
    assert after["virginia"] is good["virginia"]
    again = {"virginia": parse(metrics(11, 11, 0.6))}
    assert frame(after, again)["pairs"]["ireland>virginia"]["applied"] == 1  # the one new update, not 11
    assert baseline(after, again)["virginia"] is again["virginia"]


def test_the_layout_draws_every_node_and_paths_follow_the_tree():
    topology = load_topology("ec2-7region.toml", protocol="saturn")
    drawn = layout(topology)
    names = {n["name"] for n in drawn["nodes"]}
    assert set(topology.region_names) <= names
    assert {s.name for s in topology.serializers} <= names
    assert all(0 <= n["x"] <= 1 and 0 <= n["y"] <= 1 for n in drawn["nodes"])
    assert len(drawn["edges"]) == len(topology.tree)
    for a in topology.region_names:
        for b in topology.region_names:
            if a != b:
                path = drawn["paths"][f"{a}>{b}"]
                assert path[0] == a and path[-1] == b
                assert all(nxt in topology.tree_neighbours[cur] for cur, nxt in pairwise(path))
    assert tree_path(topology.tree_neighbours, "virginia", "virginia") == ["virginia"]


def test_without_a_tree_labels_take_the_direct_link():
    drawn = layout(load_topology("demo-3region.toml", protocol="eventual"))
    assert drawn["edges"] == [] and drawn["paths"]["virginia>ireland"] == ["virginia", "ireland"]
