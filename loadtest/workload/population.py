"""Writing the load test's social network into the store, in the app's own schema.

Every user of the graph becomes a Chirp account (``u00042``) whose home group is the placement's
group for it; friendships become mutual follows; each user starts with a few tweets, found in
their userline, their friends' timelines and the public line. One Batch per user, written at the
user's home region (where all the user's rows are local), so a 2,000-user network is seeded in
seconds; then :func:`wait_seeded` waits until every region has received all of it.

Load-test accounts share one password, hashed with few PBKDF2 iterations: a hundred log-ins at the
start of a run would otherwise cost a minute of CPU (the app's own sign-up keeps Django's default).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from causal_client import CausalClient, Mutation
from loadtest.workload.graph import SocialGraph
from loadtest.workload.placement import Placement
from services.topology import Topology
from webapp.social_values import Entry

PASSWORD = "load-test-password"
HASH_ITERATIONS = 1_000
TWEETS_PER_USER = 2
TIMELINE_ENTRIES = 40  # one page
PUBLIC_ENTRIES = 400
MAX_COLUMNS = 1000  # column operations per Mutation (the store's limit)
ACCOUNTS_GROUP = "all"

BODIES = (
    "Morning! Anyone else reading about causal consistency today?",
    "Just landed. The latency here is something else.",
    "Labels are tiny, and that is the whole point.",
    "Trying the new coffee place near the office.",
    "Replicas everywhere, and still I cannot find my keys.",
    "Weekend plans: hiking, then more hiking.",
)


def username(user: int) -> str:
    return f"u{user:05d}"


def user_of(name: str) -> int:
    """The graph's user behind a load-test username (ValueError for any other name)."""
    if len(name) < 6 or name[0] != "u" or not name[1:].isdigit():
        raise ValueError(f"{name!r} is not a load-test username")
    return int(name[1:])


def password_hash(password: str = PASSWORD) -> str:
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    return hasher.encode(password, hasher.salt(), iterations=HASH_ITERATIONS)


@dataclass(frozen=True)
class SeedTweet:
    entry: Entry
    time_us: int


def seed_tweets(graph: SocialGraph, placement: Placement, seed: int, now_us: int) -> list[list[SeedTweet]]:
    """Each user's starting tweets (newest first), spread over the hour before ``now_us``."""
    rng = random.Random(seed)
    tweets = []
    for user in range(graph.users):
        own = []
        for _ in range(TWEETS_PER_USER):
            at = now_us - rng.randrange(3_600_000_000)
            tweet_id = f"{at:016x}{rng.getrandbits(24):06x}"
            own.append(
                SeedTweet(Entry(tweet_id, username(user), rng.choice(BODIES), placement.group_of(user)), at)
            )
        tweets.append(sorted(own, key=lambda t: t.entry.id, reverse=True))
    return tweets


def user_mutations(
    user: int, graph: SocialGraph, placement: Placement, tweets: Sequence[Sequence[SeedTweet]], hashed: str
) -> list[Mutation]:
    """Everything one user starts with: account, directory entry, follows both ways, tweets,
    userline, timeline (own and friends' tweets) and a share of the public line."""
    name, group = username(user), placement.group_of(user)
    friends = graph.friends[user]
    own = tweets[user]
    joined = min((t.time_us for t in own), default=0) - 1
    mutations = [
        Mutation(ACCOUNTS_GROUP, f"account:{name}").update(
            {"password": hashed, "home": group, "joined": str(joined)}
        ),  # counts: the rows' sizes
        Mutation(ACCOUNTS_GROUP, "directory").set(f"{joined:016d}|{name}", name),
    ]
    relations = {username(f): placement.group_of(f) for f in friends}
    for row in (f"following:{name}", f"followers:{name}"):
        mutations += chunked(group, row, relations.items())
    for tweet in own:
        entry = tweet.entry
        mutations.append(
            Mutation(group, f"tweet:{entry.id}").update(
                {"author": name, "body": entry.body, "entry": entry.to_json()}
            )
        )
    mutations += chunked(group, f"userline:{name}", ((t.entry.id, t.entry.to_json()) for t in own))
    seen = [t for f in (user, *friends) for t in tweets[f]]
    newest = sorted(seen, key=lambda t: t.entry.id, reverse=True)[:TIMELINE_ENTRIES]
    mutations += chunked(group, f"timeline:{name}", ((t.entry.id, t.entry.to_json()) for t in newest))
    return mutations


def chunked(group: str, row: str, columns: Iterable[tuple[str, str]]) -> list[Mutation]:
    """Columns of one row as Mutations of at most MAX_COLUMNS operations (hubs have many friends)."""
    mutations: list[Mutation] = []
    for i, (column, value) in enumerate(columns):
        if i % MAX_COLUMNS == 0:
            mutations.append(Mutation(group, row))
        mutations[-1].set(column, value)
    return mutations


def public_mutations(tweets: Sequence[Sequence[SeedTweet]]) -> list[Mutation]:
    newest = sorted((t for own in tweets for t in own), key=lambda t: t.entry.id, reverse=True)
    return chunked(
        ACCOUNTS_GROUP, "public", ((t.entry.id, t.entry.to_json()) for t in newest[:PUBLIC_ENTRIES])
    )


def seed(
    client: CausalClient,
    graph: SocialGraph,
    placement: Placement,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, str]:
    """Writes the whole network; returns, per region, the last user seeded there (what
    :func:`wait_seeded` waits for)."""
    hashed = password_hash()
    tweets = seed_tweets(graph, placement, seed, time.time_ns() // 1000)
    sessions = {region: client.session(region) for region in placement.regions}
    last: dict[str, str] = {}
    sessions[placement.regions[0]].batch(public_mutations(tweets))
    for user in range(graph.users):
        home = placement.home[user]
        sessions[home].batch(user_mutations(user, graph, placement, tweets, hashed))
        last[home] = username(user)
        if progress is not None and (user + 1) % 250 == 0:
            progress(user + 1, graph.users)
    return last


def wait_seeded(
    client: CausalClient, topology: Topology, last: dict[str, str], timeout: float = 120.0
) -> None:
    """Returns once every region sees every region's last seeded account (bulk transfer is FIFO
    per origin, so then it has all of them); TimeoutError names what is missing."""
    deadline = time.monotonic() + timeout
    missing = [(region, name) for region in topology.region_names for name in last.values()]
    while missing:
        missing = [
            (region, name)
            for region, name in missing
            if "password" not in client.session(region).read(ACCOUNTS_GROUP, f"account:{name}", ["password"])
        ]
        if missing and time.monotonic() > deadline:
            raise TimeoutError(f"seeding not replicated after {timeout:.0f} s: {missing[:5]} ...")
        if missing:
            time.sleep(0.2)
