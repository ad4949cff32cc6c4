"""Conversations at the data layer (webapp/social.py): a reply is listed under its tweet
(``replies:<id>``, written in the reply's atomic batch), and a region never lists a reply whose
tweet it cannot show. The sequence that would break it, on causality-3region (A→C slow, A→B and
B→C fast): a tweet posted at a, read and answered at b, the tweet's replies read at c with the
tweet in one snapshot. Under ``eventual`` the reply reaches c long before its tweet, so the
snapshot lists a reply without its tweet; under ``saturn`` never."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from helpers.clusters import cluster_under
from helpers.waiting import eventually, play_until_caught

from causal_client import ReadSpec
from services.launcher.cluster import Cluster
from webapp.context import RegionContext
from webapp.social import Social
from webapp.social_values import Account

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

ROUNDS = 8
EVENTUAL_ROUNDS = 30


@pytest.fixture(scope="module", params=["eventual", "saturn"])
def cluster(request, tmp_path_factory) -> Iterator[Cluster]:
    with cluster_under(request.param, "causality-3region.toml", tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def regions(cluster) -> Iterator[dict[str, RegionContext]]:
    contexts = {r: RegionContext(cluster.topology, r) for r in cluster.topology.region_names}
    yield contexts
    for ctx in contexts.values():
        ctx.client.close()


def social_at(ctx: RegionContext) -> Social:
    return Social(ctx, ctx.client.session(ctx.region))


def person(name: str) -> Account:
    return Account(f"{name}{secrets.token_hex(3)}", "", "all", 0)


def listed_without_its_tweet(regions: dict[str, RegionContext]) -> bool:
    """One round; True when c's snapshot of the tweet and its replies lists the reply alone."""
    author, replier = person("op"), person("re")
    tweet = social_at(regions["a"]).post(author, "anyone?")
    at_b = social_at(regions["b"])
    seen = eventually(lambda: at_b.tweet(tweet.group, tweet.id), timeout=10, what="the tweet at b")
    reply = at_b.post(replier, f"@{author.username} yes", reply_to=seen)
    at_c = social_at(regions["c"]).session
    specs = [
        ReadSpec(tweet.group, f"tweet:{tweet.id}", ("entry",)),
        ReadSpec(tweet.group, f"replies:{tweet.id}"),
    ]

    def snapshot():
        found, replies = at_c.multi_read(specs)
        return (found, replies) if reply.id in replies else None

    found, _ = eventually(snapshot, timeout=10, interval=0.001, what="the reply listed at c")
    return "entry" not in found


def test_a_region_never_lists_a_reply_without_its_tweet(cluster, regions):
    play_until_caught(
        cluster.topology.protocol, lambda: listed_without_its_tweet(regions),
        "a reply listed without its tweet", ROUNDS, EVENTUAL_ROUNDS,
    )  # fmt: skip


def deleted_before_its_reply_shows(regions: dict[str, RegionContext]) -> bool:
    """One round; True when c sees a tweet's tombstone but not the reply its author had seen
    before deleting it: the tweet posted at b, answered at a (a→c is slow), deleted at b once
    the reply was visible there (b→c is fast)."""
    author, replier = person("op"), person("re")
    at_b, at_a = social_at(regions["b"]), social_at(regions["a"])
    tweet = at_b.post(author, "soon deleted")
    seen = eventually(lambda: at_a.tweet(tweet.group, tweet.id), timeout=10, what="the tweet at a")
    reply = at_a.post(replier, f"@{author.username} noted", reply_to=seen)
    eventually(
        lambda: at_b.tweet(reply.group, reply.id), timeout=10, what="the reply at b (its author saw it)"
    )
    at_b.delete(author, tweet)
    at_c = social_at(regions["c"]).session
    specs = [
        ReadSpec(tweet.group, f"tweet:{tweet.id}", ("deleted",)),
        ReadSpec(reply.group, f"tweet:{reply.id}", ("entry",)),
    ]

    def snapshot():
        deleted, replied = at_c.multi_read(specs)
        return ("entry" in replied,) if "deleted" in deleted else None  # a tuple: truthy either way

    (reply_shown,) = eventually(snapshot, timeout=10, interval=0.001, what="the tombstone at c")
    return not reply_shown


def test_a_delete_never_shows_before_the_reply_it_followed(cluster, regions):
    """A delete carries its label: a region that applies it already shows every reply its
    author had seen, so the reply is never hidden by a delete that came after it."""
    play_until_caught(
        cluster.topology.protocol, lambda: deleted_before_its_reply_shows(regions),
        "a delete seen before the reply it followed", ROUNDS, EVENTUAL_ROUNDS,
    )  # fmt: skip


def test_the_conversation_reads_the_chain_and_the_replies_oldest_first(cluster, regions):
    social = social_at(regions["a"])
    op, first, second = person("op"), person("one"), person("two")
    tweet = social.post(op, "the start")
    one = social.post(first, "a reply", reply_to=tweet)
    two = social.post(second, "a reply to the reply", reply_to=social.tweet(one.group, one.id))
    later = social.post(second, "a second reply", reply_to=tweet)
    talk = social.conversation(tweet.group, tweet.id)
    assert talk is not None and talk.ancestors == [] and not talk.cut
    assert [r.id for r in talk.replies] == [one.id, later.id]  # oldest first
    deep = social.conversation(two.group, two.id)
    assert deep is not None and [a.id for a in deep.ancestors] == [tweet.id, one.id]
    counts = social.react_to([tweet, social.tweet(one.group, one.id)], None)
    assert (counts[tweet.id].replies, counts[one.id].replies) == (2, 1)
    assert social.conversation(tweet.group, "0" * 22) is None
