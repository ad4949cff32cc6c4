"""The configuration generator (paper §5, Algorithm 3): shapes, the exact placement of one shape,
the search, and the topology it writes (its tree's paths are the ones the generator computed)."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from helpers.topologies import TOPOLOGIES

from services.configure.__main__ import main
from services.configure.output import simplify
from services.configure.placement import Instance, place
from services.configure.search import find_configuration
from services.configure.shapes import Tree, describe, grow
from services.topology import Topology

EC2 = Topology.load(TOPOLOGIES / "ec2-7region.toml")


def uniform(regions: list[str]) -> dict[frozenset[str], float]:
    return {frozenset(p): 1.0 for p in itertools.combinations(regions, 2)}


def instance_of(
    latency: dict[frozenset[str], float], regions: dict[str, str], candidates: list[str]
) -> Instance:
    def between(a: str, b: str) -> float:
        return 0.0 if a == b else latency[frozenset((a, b))]

    return Instance(regions, candidates, between, uniform(list(regions)))


def ec2_subset(names: list[str]) -> Instance:
    sites = {r.name: r.site for r in EC2.regions if r.name in names}
    return Instance(sites, sorted(set(sites.values())), EC2.latency_ms_between, uniform(list(sites)))


def test_growing_a_shape_gives_every_shape_once():
    shapes = ["a"]
    shapes = [("a", "b")]
    for n, region in enumerate("cdef", start=3):
        shapes = [new for shape in shapes for new in grow(shape, region)]
        assert len(shapes) == math.prod(range(1, 2 * n - 2, 2))  # (2n-3)!! rooted binary trees
        assert len({describe(s) for s in shapes}) == len(shapes)


def test_a_path_is_the_edges_between_two_leaves():
    tree = Tree((("a", "b"), "c"))
    assert sorted(tree.edges[k][1] for k in tree.path("a", "b")) == ["a", "b"]
    assert sorted(str(tree.edges[k][1]) for k in tree.path("a", "c")) == ["1", "a", "c"]


def test_a_tree_metric_is_matched_exactly():
    """B-C costs exactly B-A plus A-C: a serializer at A gives every pair its bulk latency."""
    latency = {frozenset("AB"): 10.0, frozenset("AC"): 20.0, frozenset("BC"): 30.0}
    instance = instance_of(latency, {"a": "A", "b": "B", "c": "C"}, ["A", "B", "C"])
    best = find_configuration(instance, ["a", "b", "c"]).best
    assert best.weighted_mismatch == pytest.approx(0.0, abs=1e-6)
    for a, b in itertools.combinations("abc", 2):
        assert best.path_ms(a, b, instance) == pytest.approx(instance.bulk_ms(a, b))


def test_artificial_delays_slow_a_label_path_that_is_too_fast():
    """A relay site X is closer to both regions than they are to each other: the serializer goes
    there, and its edges get 30 ms of delay in all (paper §5.4's delta)."""
    latency = {frozenset("AB"): 50.0, frozenset("AX"): 10.0, frozenset("BX"): 10.0}
    instance = instance_of(latency, {"a": "A", "b": "B"}, ["X"])
    placed = place(Tree(("a", "b")), instance)
    assert placed.sites == {0: "X"}
    assert sum(placed.delays) == pytest.approx(30.0)
    assert placed.path_ms("a", "b", instance) == pytest.approx(50.0)


def test_the_search_finds_what_an_exhaustive_search_finds_on_five_regions():
    instance = ec2_subset(["virginia", "oregon", "ireland", "tokyo", "sydney"])
    order = list(instance.region_sites)
    beam = find_configuration(instance, order)
    exhaustive = find_configuration(instance, order, threshold_ms=math.inf, beam=10**6)
    assert exhaustive.placed == 1 + 3 + 15 + 105 - 1 + 1  # every shape of 3, 4 and 5 leaves
    assert beam.placed < exhaustive.placed
    assert beam.best.mean_mismatch == pytest.approx(exhaustive.best.mean_mismatch, abs=1e-6)


def test_the_written_topology_has_the_tree_the_generator_computed(tmp_path, capsys):
    out = tmp_path / "m.toml"
    assert main([str(TOPOLOGIES / "ec2-7region.toml"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "weighted mean mismatch" in printed and "shapes placed" in printed
    written = Topology.load(out)
    assert written.name == "m" and written.protocol == "saturn" and written.region_names == EC2.region_names
    assert written.latency_ms == EC2.latency_ms and written.groups == EC2.groups
    for row in printed.splitlines():  # "a ↔ b  weight  bulk  tree  mismatch"
        if "↔" in row:
            pair, _, bulk, tree, _ = row.rsplit(None, 4)
            a, b = pair.split(" ↔ ")
            assert written.tree_path_ms(a, b) == pytest.approx(float(tree), abs=0.05)
            assert written.region_latency_ms(a, b) == pytest.approx(float(bulk))


def test_simplifying_keeps_every_path():
    instance = ec2_subset(["virginia", "california", "oregon", "ireland"])
    best = find_configuration(instance, list(instance.region_sites)).best
    config = simplify(best, instance)
    names = {name for name, _ in config.serializers}
    assert len(names) <= len(best.tree.internal)
    assert all(a in instance.region_sites or a in names for a, _, _ in config.edges)


@pytest.mark.parametrize(
    "weights, message",
    [
        ({"atlantis": {"tokyo": 1}}, "unknown region 'atlantis'"),
        ({"virginia": {"tokyo": -1}}, "a weight is a number >= 0"),
        ({"virginia": {"tokyo": 1}, "tokyo": {"virginia": 2}}, "given twice with different weights"),
        ({"virginia": {"tokyo": 0}}, "every weight is 0"),
        (["virginia"], "expected an object"),
    ],
)
def test_bad_weights_are_refused_clearly(tmp_path, capsys, weights, message):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(weights))
    assert main([str(TOPOLOGIES / "ec2-7region.toml"), "--weights", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_candidate_site_is_refused(capsys):
    assert main([str(TOPOLOGIES / "ec2-7region.toml"), "--candidates", "NV,MARS"]) == 2
    assert "candidate site 'MARS'" in capsys.readouterr().err


def test_weights_shape_the_tree(tmp_path, capsys):
    """Only Tokyo ↔ Sydney matters: the generator gives that pair its bulk latency."""
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"tokyo": {"sydney": 1}}))
    out = tmp_path / "w.toml"
    assert main([str(TOPOLOGIES / "ec2-7region.toml"), "--weights", str(path), "--out", str(out)]) == 0
    assert Topology.load(out).tree_path_ms("tokyo", "sydney") == pytest.approx(52.0)
