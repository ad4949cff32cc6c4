"""The load test's social graph: Facebook-like shape, exact size, reproducible, a safe file format."""

from __future__ import annotations

import gzip
import time
from collections import deque

import networkx as nx
import pytest

from loadtest.workload.graph import (
    NEW_ORLEANS_AVERAGE_DEGREE,
    NEW_ORLEANS_EDGES,
    NEW_ORLEANS_USERS,
    SocialGraph,
    generate,
    local_clustering,
    statistics,
)

USERS = 2000


@pytest.fixture(scope="module")
def graph() -> SocialGraph:
    return generate(USERS, seed=1)


def connected(graph: SocialGraph) -> bool:
    seen, queue = {0}, deque([0])
    while queue:
        for f in graph.friends[queue.popleft()]:
            if f not in seen:
                seen.add(f)
                queue.append(f)
    return len(seen) == graph.users


def test_new_orleans_constants():
    assert (NEW_ORLEANS_USERS, NEW_ORLEANS_EDGES) == (61_096, 905_565)
    assert round(NEW_ORLEANS_AVERAGE_DEGREE, 2) == 29.64


@pytest.mark.parametrize(("users", "degree"), [(200, None), (2000, None), (1000, 10.0), (500, 2.0)])
def test_counts(users, degree):
    g = generate(users, seed=3, average_degree=degree)
    wanted = users * (degree or NEW_ORLEANS_AVERAGE_DEGREE) / 2
    assert g.users == users
    assert g.edges == round(wanted)  # exact, so within a few % a fortiori
    assert abs(g.edges - wanted) <= 0.02 * wanted


def test_well_formed(graph):
    for u, row in enumerate(graph.friends):
        assert list(row) == sorted(set(row)), "sorted, no duplicates"
        assert u not in row, "no self loops"
        assert row and row[0] >= 0 and row[-1] < graph.users
        assert all(graph.are_friends(v, u) for v in row), "undirected"
    assert sum(graph.degree(u) for u in range(graph.users)) == 2 * graph.edges
    assert connected(graph)
    assert "friends-of-friends" in graph.model and "\n" not in graph.model


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_facebook_shape(seed):
    """Heavy tail (hubs; the top 1 % hold several times their share) and clustering, at any seed."""
    s = statistics(generate(USERS, seed=seed))
    print(f"seed {seed}:", *s.lines(), sep="\n  ")
    assert s.mean_degree == pytest.approx(NEW_ORLEANS_AVERAGE_DEGREE, abs=0.01)
    assert s.min_degree >= 1
    assert s.median_degree < s.mean_degree  # right-skewed
    assert s.max_over_mean >= 6
    assert s.top1_share >= 0.05  # five times the 1 % a flat distribution gives
    assert s.p99_degree >= 4 * s.mean_degree
    assert 0.15 <= s.clustering <= 0.40  # New Orleans: 0.22
    assert s.clustering >= 10 * s.random_clustering
    assert s.clustering_users == USERS  # exact at this size


def test_more_clustered_and_more_skewed_than_a_random_graph(graph):
    same_density = nx.gnm_random_graph(graph.users, graph.edges, seed=1)
    random_graph = SocialGraph(
        tuple(tuple(sorted(same_density[u])) for u in range(graph.users)), 1, "G(n, m)"
    )
    ours, theirs = statistics(graph), statistics(random_graph)
    assert ours.clustering >= 8 * theirs.clustering
    assert ours.max_over_mean >= 3 * theirs.max_over_mean
    assert ours.top1_share >= 2.5 * theirs.top1_share


def test_statistics_exact_and_sampled(graph):
    exact = statistics(graph, sample=None)
    sampled = statistics(graph, sample=300)
    assert exact.clustering_users == USERS and sampled.clustering_users == 300
    assert sampled.clustering == pytest.approx(exact.clustering, abs=0.05)
    assert statistics(graph, sample=300) == sampled  # the sample is seeded
    assert exact.p90_degree <= exact.p99_degree <= exact.max_degree
    lines = exact.lines()
    assert len(lines) == 4 and "2,000" in lines[0] and "exact" in lines[3]
    assert "sampled over 300" in sampled.lines()[3]
    with pytest.raises(ValueError, match="sample"):
        statistics(graph, sample=0)


def test_local_clustering():
    triangle_and_tail = SocialGraph(((1, 2, 3), (0, 2), (0, 1), (0,)), 0, "hand-made")
    assert local_clustering(triangle_and_tail, 1) == 1.0
    assert local_clustering(triangle_and_tail, 0) == pytest.approx(1 / 3)
    assert local_clustering(triangle_and_tail, 3) == 0.0


def test_reproducible():
    assert generate(500, seed=7) == generate(500, seed=7)
    assert generate(500, seed=7).friends != generate(500, seed=8).friends
    assert generate(500, seed=7).seed == 7


@pytest.mark.parametrize("users", [3, 4, 10, 30])
def test_tiny_graphs(users):
    g = generate(users)
    assert g.users == users and connected(g)
    assert all(g.friends[u] for u in range(users))
    assert g.edges <= users * (users - 1) // 2


def test_smallest_graph_is_a_triangle():
    assert generate(3).friends == ((1, 2), (0, 2), (0, 1))


def test_save_load_round_trip(graph, tmp_path):
    path = graph.save(tmp_path / "graph.txt.gz")
    assert SocialGraph.load(path) == graph
    again = graph.save(tmp_path / "again.txt.gz")
    assert path.read_bytes() == again.read_bytes()  # reproducible bytes
    lines = gzip.decompress(path.read_bytes()).decode().split("\n")
    assert lines[0].startswith(f"saturn-social-graph 1 users={USERS} edges={graph.edges} seed=1 model=")
    assert len(lines) == USERS + 2  # header, one line per user, final newline
    assert path.stat().st_size < 200_000


def test_round_trip_with_lonely_users(tmp_path):
    g = SocialGraph(((1,), (0,), (), (4,), (3,)), 5, "hand-made, with a user without friends")
    assert SocialGraph.load(g.save(tmp_path / "g.txt.gz")) == g


def write_gz(path, text: str):
    path.write_bytes(gzip.compress(text.encode()))
    return path


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("", "empty"),
        ("hello world\n", "not a saturn-social-graph"),
        ("saturn-social-graph 2 users=2 edges=1 seed=1 model=x\n1\n\n", "version"),
        ("saturn-social-graph 1 users=3 edges=1 seed=1 model=x\n1\n\n", "truncated"),
        ("saturn-social-graph 1 users=2 edges=2 seed=1 model=x\n1\n\n", "friendships"),
        ("saturn-social-graph 1 users=2 edges=1 seed=1 model=x\n2\n\n", "out of"),
        ("saturn-social-graph 1 users=3 edges=2 seed=1 model=x\n2 1\n\n\n", "out of order"),
        ("saturn-social-graph 1 users=2 edges=1 seed=1 model=x\nx\n\n", "not a list"),
        ("saturn-social-graph 1 users=two edges=1 seed=1 model=x\n1\n\n", "not an integer"),
        ("saturn-social-graph 1 edges=1 users=2 seed=1 model=x\n1\n\n", "expected users"),
    ],
)
def test_bad_file(tmp_path, text, fault):
    path = write_gz(tmp_path / "bad.txt.gz", text)
    with pytest.raises(ValueError, match=fault) as info:
        SocialGraph.load(path)
    assert str(path) in str(info.value)


def test_damaged_files(graph, tmp_path):
    good = graph.save(tmp_path / "good.txt.gz").read_bytes()
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(good[: len(good) // 2])
    plain = tmp_path / "plain.txt"
    plain.write_text("saturn-social-graph 1 users=0 edges=0 seed=1 model=x\n")
    lines = gzip.decompress(good).decode().split("\n")
    short = write_gz(tmp_path / "short.txt.gz", "\n".join(lines[: USERS // 2]) + "\n")
    for path in (cut, plain, short, tmp_path / "missing.txt.gz", tmp_path):
        with pytest.raises(ValueError) as info:
            SocialGraph.load(path)
        assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "fault"),
    [
        ({"users": 2}, "users"),
        ({"users": 0}, "users"),
        ({"users": -5}, "users"),
        ({"users": 10.0}, "users"),
        ({"users": 100, "average_degree": -1}, "average_degree"),
        ({"users": 100, "average_degree": 1}, "average_degree"),
        ({"users": 100, "average_degree": 100}, "average_degree"),
        ({"users": 100, "average_degree": float("nan")}, "average_degree"),
        ({"users": 100, "random_share": 1.5}, "random_share"),
        ({"users": 100, "spread": -1}, "spread"),
    ],
)
def test_bad_arguments(kwargs, fault):
    with pytest.raises(ValueError, match=fault):
        generate(**kwargs)


@pytest.mark.slow
def test_full_new_orleans_size():
    began = time.monotonic()
    g = generate(NEW_ORLEANS_USERS, seed=1)
    took = time.monotonic() - began
    s = statistics(g, sample=500)
    print(f"{NEW_ORLEANS_USERS:,} users in {took:.1f} s:", *s.lines(), sep="\n  ")
    assert (g.users, g.edges) == (NEW_ORLEANS_USERS, NEW_ORLEANS_EDGES)
    assert s.max_over_mean >= 15 and s.top1_share >= 0.06
    assert 0.15 <= s.clustering <= 0.35
    assert took < 60
