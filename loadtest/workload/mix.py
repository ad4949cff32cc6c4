"""The Facebook-derived operation mix, mapped onto Chirp's operations.

The mix is Saturn's own Facebook benchmark (``angbrav/basho_bench``, ``saturn_complex_rpc.erl``,
used for the paper's §7.4): 98.21 % reads and 1.79 % updates. A read targets the user's own data
(17.9 %), a uniformly random user's (51.4 %) or a random friend's or the user's own (30.7 %); an
update targets the user's own data (7.8 %) or a random friend's (92.2 %). Which region holds the
target's data (the placement) decides whether the operation is local or migrates.

The mapping onto the app (written down here and in the README):

=====================  =======================================================================
Facebook class          Chirp operation
=====================  =======================================================================
read, own               home timeline (``timeline:<me>``, the user's own group)
read, random user       that user's page (their userline, in their group); one in ten of these
                        reads is the public line instead (a sample of everybody's tweets)
read, friend or self    the page of a random friend, or the user's own page
update, own             post a tweet (own group, then fan-out to the followers' timelines)
update, friend          reply to the friend's newest tweet (reads the friend's data, writes a
                        reply that depends on it: the causal case); one in five is a follow or
                        unfollow of the friend instead (writes the friend's ``followers`` row)
=====================  =======================================================================

Chirp's own pages beyond the benchmark (``with_chirp_pages``, the web target's mix): one in ten
random-user reads is a search, one in ten own updates a profile edit, one in twenty friend
updates a block of the friend undone at once (which takes the follows away both ways). The
shares are zero elsewhere, so the store target draws exactly the benchmark's sequence.

Variants keep the targets and change only the update share: ``tao`` is Eiger's Facebook TAO
workload (0.2 % updates), ``write-heavy`` is 50:50.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace


class Op(enum.StrEnum):
    HOME = "home timeline"
    USER_PAGE = "user page"
    PUBLIC = "public line"
    POST = "post"
    REPLY = "reply"
    FOLLOW = "follow/unfollow"
    SEARCH = "search"
    PROFILE = "profile edit"
    BLOCK = "block/unblock"


READS = frozenset({Op.HOME, Op.USER_PAGE, Op.PUBLIC, Op.SEARCH})


@dataclass(frozen=True)
class Mix:
    """Shares of a workload; a read's target is own / random / friend-or-self (the rest)."""

    name: str
    update_share: float
    read_own: float = 0.179
    read_random: float = 0.514
    update_own: float = 0.078
    public_share_of_random: float = 0.1
    follow_share_of_friend_updates: float = 0.2
    search_share_of_random: float = 0.0  # Chirp's own pages (module doc): none by default
    profile_share_of_own_updates: float = 0.0
    block_share_of_friend_updates: float = 0.0

    def __post_init__(self) -> None:
        shares = (self.update_share, self.read_own, self.read_random, self.update_own)
        if not all(0.0 <= s <= 1.0 for s in shares) or self.read_own + self.read_random > 1.0:
            raise ValueError(f"mix {self.name!r}: shares must lie in [0, 1] and reads' sum to at most 1")

    @property
    def read_friend(self) -> float:
        return 1.0 - self.read_own - self.read_random


MIXES: dict[str, Mix] = {
    "facebook": Mix("facebook", update_share=0.0179),
    "tao": Mix("tao", update_share=0.002),
    "write-heavy": Mix("write-heavy", update_share=0.5),
}


@dataclass(frozen=True)
class Action:
    """One operation of one user: ``target`` is the user whose data it touches (None: the public
    line, everybody's)."""

    op: Op
    target: int | None


def with_chirp_pages(mix: Mix) -> Mix:
    """``mix`` with Chirp's own pages (module doc): the web target's."""
    return replace(
        mix, search_share_of_random=0.1, profile_share_of_own_updates=0.1, block_share_of_friend_updates=0.05
    )


def mix_named(name: str) -> Mix:
    try:
        return MIXES[name]
    except KeyError:
        raise ValueError(f"unknown mix {name!r}; choose one of {', '.join(MIXES)}") from None


def draw(mix: Mix, rng: random.Random, user: int, friends: Sequence[int], users: int) -> Action:
    """The next operation of ``user`` (whose friends are ``friends``, out of ``users`` users)."""
    if rng.random() < mix.update_share:
        if rng.random() < mix.update_own or not friends:
            if mix.profile_share_of_own_updates and rng.random() < mix.profile_share_of_own_updates:
                return Action(Op.PROFILE, user)
            return Action(Op.POST, user)
        friend = rng.choice(friends)
        follow = rng.random() < mix.follow_share_of_friend_updates
        if (
            not follow
            and mix.block_share_of_friend_updates
            and rng.random() < mix.block_share_of_friend_updates
        ):
            return Action(Op.BLOCK, friend)
        return Action(Op.FOLLOW if follow else Op.REPLY, friend)
    pick = rng.random()
    if pick < mix.read_own:
        return Action(Op.HOME, user)
    if pick < mix.read_own + mix.read_random:
        if rng.random() < mix.public_share_of_random:
            return Action(Op.PUBLIC, None)
        if mix.search_share_of_random and rng.random() < mix.search_share_of_random:
            return Action(Op.SEARCH, None)
        return Action(Op.USER_PAGE, rng.randrange(users))
    pool = len(friends) + 1  # friends or self
    index = rng.randrange(pool)
    return Action(Op.USER_PAGE, friends[index] if index < len(friends) else user)
