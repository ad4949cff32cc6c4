"""Pinned tweets: a user shows at most ``PIN_LIMIT`` of their own tweets at the top of their
profile. The limit is an invariant that blue (causal) operations cannot keep: two regions that
each see two pins and each add one would both succeed, and the user would have four. So pinning
is red (RedBlue's rule: an operation whose effect can break an invariant when it runs concurrently
with another is red, docs/REDBLUE.md): the set of pins is a strongly consistent register, changed
by compare-and-set from the value the region read.

What pages show is the set's blue copy, a row of the user's home group whose columns are named by
the register's timestamps (its newest column is the newest set): a profile reads it locally, at
causal-read cost, and two copies written in either order leave the newest set on top. A pin that
raced another is retried from the newer set; one whose outcome is unknown is settled by reading
the register (pinning is idempotent). A process that dies between the register and the copy
leaves the copy one change behind until the user's next pin or unpin rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from causal_client import CompareAndSet, Conflict, OutcomeUnknown, Session
from causal_client.data import Row

PINS = "pins"  # the strong registers' namespace: one register per user
PIN_LIMIT = 3
TRIES = 5


class PinLimit(Exception):
    """The user has ``PIN_LIMIT`` pins already: one must go before another comes."""


@dataclass(frozen=True, slots=True)
class Pinned:
    group: str
    tweet_id: str

    def __str__(self) -> str:
        return f"{self.group}/{self.tweet_id}"


def parse(text: str | None) -> list[Pinned]:
    pins = []
    for part in (text or "").split():
        group, _, tweet_id = part.partition("/")
        pins.append(Pinned(group, tweet_id))
    return pins


def unparse(pins: list[Pinned]) -> str:
    return " ".join(str(p) for p in pins)


def pin(session: Session, username: str, home_group: str, tweet: Pinned) -> bool:
    """Pins ``tweet`` (newest first); False if it was pinned already. ``PinLimit`` if the user
    has ``PIN_LIMIT`` pins."""

    def add(pins: list[Pinned]) -> list[Pinned] | None:
        if tweet in pins:
            return None
        if len(pins) >= PIN_LIMIT:
            raise PinLimit(f"@{username} has {PIN_LIMIT} pinned tweets already: unpin one first")
        return [tweet, *pins]

    return _change(session, username, home_group, add)


def unpin(session: Session, username: str, home_group: str, tweet: Pinned) -> bool:
    """Unpins ``tweet``; False if it was not pinned."""
    return _change(
        session, username, home_group, lambda pins: [p for p in pins if p != tweet] if tweet in pins else None
    )


def _change(
    session: Session, username: str, home_group: str, change: Callable[[list[Pinned]], list[Pinned] | None]
) -> bool:
    """The red operation: read the set, compute the new one here (the generator), and
    compare-and-set it (the shadow operation, in the registers' total order); then the blue copy."""
    for _ in range(TRIES):
        current = session.strong_read(PINS, username)
        wanted = change(parse(current.value))
        if wanted is None:
            return False
        new = unparse(wanted)
        try:
            done = session.execute(PINS, username, CompareAndSet(current.value, new))
        except OutcomeUnknown:
            settled = session.strong_read(PINS, username)
            if settled.value != new:
                continue  # it did not land, or another change followed: decide again from there
            done_ts = settled.ts
        except Conflict:
            continue
        else:
            if not done.applied:
                continue  # another change came first: decide again from it
            done_ts = done.ts
        session.write(home_group, copy_row(username), {done_ts: new or "-"})
        return True
    raise Conflict(f"pins of @{username}: other changes kept coming first ({TRIES} tries)")


def pinned(session: Session, username: str, home_group: str) -> list[Pinned]:
    """The user's pins as their blue copy has them here (newest set)."""
    return from_copy(session.slice(home_group, copy_row(username), limit=1))


def copy_row(username: str) -> str:
    """The row of the user's home group that holds the blue copy (read newest first, limit 1)."""
    return f"pins:{username}"


def from_copy(row: Row) -> list[Pinned]:
    return [] if not row.cells or row.cells[0].text == "-" else parse(row.cells[0].text)
