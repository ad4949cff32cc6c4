"""The workload mix: over many draws, the shares of the Saturn Facebook benchmark come out."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from loadtest.workload.mix import MIXES, READS, Action, Mix, Op, draw, mix_named

DRAWS = 400_000
USERS = 1000
FRIENDS = (3, 7, 11, 19)
USER = 5


def classify(action: Action) -> str:
    """The Facebook class an action stands for (read/update x own/friend/random)."""
    if action.op in READS:
        if action.op == Op.HOME:
            return "read own"
        if action.op == Op.PUBLIC:
            return "read random"
        return "read friend-or-self" if action.target in (*FRIENDS, USER) else "read random"
    return "update own" if action.op == Op.POST else "update friend"


@pytest.fixture(scope="module")
def facebook_draws() -> list[Action]:
    rng = random.Random(42)
    return [draw(MIXES["facebook"], rng, USER, FRIENDS, USERS) for _ in range(DRAWS)]


def share(counter: Counter, *keys: str) -> float:
    return sum(counter[k] for k in keys) / sum(counter.values())


def test_facebook_read_update_split(facebook_draws):
    updates = sum(1 for a in facebook_draws if a.op not in READS) / DRAWS
    assert updates == pytest.approx(0.0179, abs=0.001)


def test_facebook_read_targets(facebook_draws):
    reads = Counter(classify(a) for a in facebook_draws if a.op in READS)
    # Random users include, rarely, the user or a friend (5 of 1000): classified by target that
    # is friend-or-self, so allow for it.
    assert share(reads, "read own") == pytest.approx(0.179, abs=0.004)
    assert share(reads, "read random") == pytest.approx(0.514 * (1 - 0.9 * 5 / USERS), abs=0.005)
    assert share(reads, "read friend-or-self") == pytest.approx(0.307 + 0.514 * 0.9 * 5 / USERS, abs=0.005)


def test_facebook_update_targets(facebook_draws):
    updates = Counter(classify(a) for a in facebook_draws if a.op not in READS)
    assert share(updates, "update own") == pytest.approx(0.078, abs=0.01)
    assert share(updates, "update friend") == pytest.approx(0.922, abs=0.01)
    friend_ops = Counter(a.op for a in facebook_draws if a.op in (Op.REPLY, Op.FOLLOW))
    assert share(friend_ops, Op.FOLLOW) == pytest.approx(0.2, abs=0.02)
    assert all(a.target in FRIENDS for a in facebook_draws if a.op in (Op.REPLY, Op.FOLLOW))


def test_public_line_is_a_tenth_of_random_reads(facebook_draws):
    ops = Counter(a.op for a in facebook_draws)
    random_reads = 0.9821 * 0.514 * DRAWS
    assert ops[Op.PUBLIC] / random_reads == pytest.approx(0.1, abs=0.005)
    assert all(a.target is None for a in facebook_draws if a.op == Op.PUBLIC)


@pytest.mark.parametrize(("name", "updates"), [("tao", 0.002), ("write-heavy", 0.5)])
def test_variants_change_only_the_update_share(name, updates):
    rng = random.Random(7)
    actions = [draw(mix_named(name), rng, USER, FRIENDS, USERS) for _ in range(100_000)]
    assert sum(1 for a in actions if a.op not in READS) / len(actions) == pytest.approx(updates, abs=0.004)
    reads = Counter(classify(a) for a in actions if a.op in READS)
    assert share(reads, "read own") == pytest.approx(0.179, abs=0.01)


def test_user_without_friends_reads_self_and_posts_own():
    rng = random.Random(1)
    actions = [draw(MIXES["write-heavy"], rng, USER, (), USERS) for _ in range(5000)]
    assert {a.op for a in actions if a.op not in READS} == {Op.POST}
    assert all(a.target == USER for a in actions if a.op == Op.HOME)


def test_draws_are_reproducible():
    def run(seed: int) -> list[Action]:
        rng = random.Random(seed)
        return [draw(MIXES["facebook"], rng, USER, FRIENDS, USERS) for _ in range(1000)]

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_bad_mixes_are_refused():
    with pytest.raises(ValueError, match="unknown mix"):
        mix_named("youtube")
    with pytest.raises(ValueError, match="shares"):
        Mix("bad", update_share=1.5)
    with pytest.raises(ValueError, match="shares"):
        Mix("bad", update_share=0.1, read_own=0.6, read_random=0.6)


def test_the_web_targets_mix_adds_chirps_own_pages_and_the_benchmarks_draws_stay_the_same():
    """Searches, profile edits and blocks come only with ``with_chirp_pages`` (the web target);
    without them the draws are the benchmark's, one for one."""
    from loadtest.workload.mix import with_chirp_pages

    def draws(mix: Mix) -> list[Action]:
        rng = random.Random(5)
        return [draw(mix, rng, USER, FRIENDS, USERS) for _ in range(20000)]

    plain = draws(MIXES["write-heavy"])
    assert not {a.op for a in plain} & {Op.SEARCH, Op.PROFILE, Op.BLOCK}
    web = Counter(a.op for a in draws(with_chirp_pages(MIXES["write-heavy"])))
    assert web[Op.SEARCH] > 200 and web[Op.PROFILE] > 20 and web[Op.BLOCK] > 100, web
