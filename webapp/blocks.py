"""Blocking and muting: whom a reader must not see, and why causality keeps a block.

One row per user, in the accounts group (replicated at every region, so any region can tell, in
the read that shows a page, whom its reader must not see):

    hidden:<user>  [accounts]  "blocks:<name>"     -> when   <user> blocks <name>
                               "blocked-by:<name>" -> when   <name> blocks <user>
                               "mutes:<name>"      -> when   <user> mutes <name> (read only on
                                                             <user>'s own pages: never told)

A block writes both users' rows and takes the follows away both ways, in one atomic batch where
a region replicates every group it touches (else the ``hidden`` rows first, then each home
group's part, in order). Blocking is the textbook reason for causal consistency (COPS and Eiger
open with it): Ann blocks Bob, then posts. Her post is causally after ``hidden:bob``'s
"blocked-by:ann", so a region makes the post visible only once that cell is visible there, and
every page reads its reader's ``hidden`` row after (or with) the entries it shows, in the same
session: wherever Bob could see the post, he sees the block too, and the page leaves the post
out. Under ``eventual`` the post can arrive first and Bob sees it
(tests/test_web_regions.py plays it with the block's way slowed).

A blocked user cannot see the blocker's tweets (lines, profile, tweet pages, replies quoting
them, the live bar's count), follow them, reply to them or mention them; the blocker no longer
sees the blocked user either. Muting hides someone from one's own lines and notices only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from causal_client import Mutation, ReadSpec, Row
from webapp.social_values import Account, Hidden

BLOCKS, BLOCKED_BY, MUTES = "blocks:", "blocked-by:", "mutes:"


def hidden_row(user: str) -> str:
    return f"hidden:{user}"


def hidden_spec(accounts_group: str, user: str) -> ReadSpec:
    return ReadSpec(accounts_group, hidden_row(user))


def hidden_of(row: Row) -> Hidden:
    found: dict[str, set[str]] = {BLOCKS: set(), BLOCKED_BY: set(), MUTES: set()}
    for cell in row:
        kind, _, name = cell.column.partition(":")
        if f"{kind}:" in found and name:
            found[f"{kind}:"].add(name)
    return Hidden(frozenset(found[BLOCKS]), frozenset(found[BLOCKED_BY]), frozenset(found[MUTES]))


def block_mutations(accounts_group: str, me: Account, them: Account, undo: bool = False) -> list[Mutation]:
    """``me`` blocks ``them`` (``undo``: no longer): both ``hidden`` rows first (the part a later
    post must come after), then, for a block, the follows both ways taken away."""
    now = str(time.time_ns() // 1000)
    mine = Mutation(accounts_group, hidden_row(me.username))
    theirs = Mutation(accounts_group, hidden_row(them.username))
    if undo:
        return [mine.delete(BLOCKS + them.username), theirs.delete(BLOCKED_BY + me.username)]
    return [
        mine.set(BLOCKS + them.username, now),
        theirs.set(BLOCKED_BY + me.username, now),
        Mutation(me.home_group, f"following:{me.username}").delete(them.username),
        Mutation(me.home_group, f"followers:{me.username}").delete(them.username),
        Mutation(them.home_group, f"following:{them.username}").delete(me.username),
        Mutation(them.home_group, f"followers:{them.username}").delete(me.username),
    ]


def mute_mutation(accounts_group: str, me: Account, them: str, undo: bool = False) -> Mutation:
    row = Mutation(accounts_group, hidden_row(me.username))
    return row.delete(MUTES + them) if undo else row.set(MUTES + them, str(time.time_ns() // 1000))


def refused_names(hidden: Hidden, names: Iterable[str]) -> list[str]:
    """Of ``names`` (mentioned, replied to, followed), those blocked either way."""
    return sorted(set(names) & hidden.apart)
