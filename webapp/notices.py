"""Notifications: someone replied to you, mentioned you, liked or reposted your tweet, followed you.

An action that should notify writes, in its own atomic batch, an outbox cell (``NoticeCell``)
next to its other cells: the same outbox that fans tweets out (webapp/fanout.py), so a notice
is as durable as the reply or like it announces, and a worker that dies leaves the cell for
the sweeper. Draining the cell reads it first (the session is then causally after the action),
finds each recipient's home group (their account row) and writes the notice into their
``notices:<user>`` row there; a recipient homed in a group this region does not replicate gets
the cell relayed to the closest region that does, as tweets are.

Rows (in the recipient's home group):

    notices:<user>       notice id -> the notice (JSON): newest first, like a line
    notices-seen:<user>  "seen" -> the newest notice id the user has seen (the unread count)

A notice's id is its action's time (the tweet id's format), so draining a cell twice writes
the same cell again. Unread: the notices newer than "seen", counted up to UNREAD_CAP.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from causal_client import Mutation, ReadSpec, Row, Session
from webapp.formatting import MENTION as MENTION_PATTERN

UNREAD_CAP = 20  # the header shows "20+" beyond
PAGE = 30  # notices per page
MAX_MENTIONS = 10  # people one tweet can notify by mentioning them
CELL_PREFIX = "n"  # an outbox column that starts with it is a notice cell (tweet ids are hex digits)
MENTION = re.compile(MENTION_PATTERN, re.IGNORECASE)  # what a tweet's text links as a mention


def notices_row(user: str) -> str:
    return f"notices:{user}"


def seen_row(user: str) -> str:
    return f"notices-seen:{user}"


@dataclass(frozen=True)
class Notice:
    """One notification: ``actor`` did ``kind``; ``tweet_id`` (in ``group``) is the reply, the
    mentioning tweet, or the tweet liked or reposted (None for a follow); ``body`` a snippet."""

    id: str
    kind: str
    actor: str
    tweet_id: str | None = None
    group: str | None = None
    body: str = ""

    def to_json(self) -> str:
        data: dict[str, str] = {"k": self.kind, "a": self.actor}
        if self.tweet_id:
            data |= {"t": self.tweet_id, "g": self.group or "", "b": self.body[:140]}
        return json.dumps(data, separators=(",", ":"))

    @staticmethod
    def from_json(notice_id: str, text: str) -> Notice:
        data = json.loads(text)
        group = data.get("g") or None
        return Notice(notice_id, data["k"], data["a"], data.get("t"), group, data.get("b", ""))


@dataclass(frozen=True)
class NoticeCell:
    """A pending notice in an outbox: ``notice`` for ``recipients``; ``group`` None: their home
    groups are still to be looked up (the cell an action writes); else all are homed there (a
    part relayed from a region that does not replicate it)."""

    notice: Notice
    recipients: tuple[str, ...]
    group: str | None = None
    queued_us: int = 0

    @property
    def column(self) -> str:
        return CELL_PREFIX + self.notice.id

    def mutation(self, group: str, outbox_row: str) -> Mutation:
        queued = self.queued_us or time.time_ns() // 1000
        value: dict[str, object] = {"n": self.notice.to_json(), "to": list(self.recipients), "q": queued}
        if self.group is not None:
            value["g"] = self.group
        return Mutation(group, outbox_row).set(self.column, json.dumps(value))

    @staticmethod
    def parse(column: str, text: str) -> NoticeCell:
        value = json.loads(text)
        notice = Notice.from_json(column.removeprefix(CELL_PREFIX), value["n"])
        return NoticeCell(notice, tuple(value["to"]), value.get("g"), int(value["q"]))


def is_notice_cell(column: str) -> bool:
    return column.startswith(CELL_PREFIX)


def mentioned(body: str, *, besides: Iterable[str] = ()) -> tuple[str, ...]:
    """The people a tweet mentions (lower case, once each, at most MAX_MENTIONS), less ``besides``."""
    skip = set(besides)
    names = dict.fromkeys(m.group("name").lower() for m in MENTION.finditer(body))
    return tuple(n for n in names if n not in skip)[:MAX_MENTIONS]


def for_tweet(
    entry_id: str, author: str, body: str, group: str, reply_author: str | None, mention_id: str
) -> list[NoticeCell]:
    """What a new tweet notifies: the author it replies to (notice ``entry_id``), and the people
    it mentions (notice ``mention_id``; never the author, and someone replied to is told once,
    as a reply)."""
    cells = []
    if reply_author and reply_author != author:
        cells.append(NoticeCell(Notice(entry_id, "reply", author, entry_id, group, body), (reply_author,)))
    mentions = mentioned(body, besides=(author, reply_author or ""))
    if mentions:
        cells.append(NoticeCell(Notice(mention_id, "mention", author, entry_id, group, body), mentions))
    return cells


def write(session: Session, group: str, recipients: Sequence[str], notice: Notice) -> None:
    """The notice into each recipient's row (all homed in ``group``), in one batch."""
    cell = notice.to_json()
    session.batch([Mutation(group, notices_row(name)).set(notice.id, cell) for name in recipients])


@dataclass
class Inbox:
    """A page of a user's notices, newest first, and how many were unread before this visit."""

    notices: list[Notice]
    next_cursor: str | None
    unread: int
    seen: str


def unread_of(rows: Sequence[Row]) -> int:
    """The unread count from the two rows ``unread_specs`` names."""
    notices, seen = rows
    mark = seen.text("seen") or ""
    return sum(1 for cell in notices if cell.column > mark)


def unread_specs(user: str, group: str) -> list[ReadSpec]:
    newest = ReadSpec(group, notices_row(user), limit=UNREAD_CAP + 1)
    return [newest, ReadSpec(group, seen_row(user), ("seen",))]


def inbox(session: Session, user: str, group: str, after: str | None = None) -> Inbox:
    """A page of the notices and the unread count, in one read."""
    specs = [ReadSpec(group, notices_row(user), limit=PAGE + 1, after=after), *unread_specs(user, group)]
    page, *unread_rows = session.multi_read(specs)
    listed = [Notice.from_json(cell.column, cell.text) for cell in page]
    more = len(listed) > PAGE
    listed = listed[:PAGE]
    seen = unread_rows[1].text("seen") or ""
    return Inbox(listed, listed[-1].id if more else None, unread_of(unread_rows), seen)


def withdrawn(session: Session, listed: Sequence[Notice], here: Callable[[str], bool]) -> set[str]:
    """The ids of the like and repost notices whose like or repost was undone since (the actor is
    no longer in the tweet's ``likers`` or ``reposters`` row), and of those a later notice of the
    same like or repost repeats (like, unlike, like again): one read, of the tweets' rows in
    groups replicated here (``here``)."""
    rows = {"like": "likers", "repost": "reposters"}
    asked = [n for n in listed if n.kind in rows and n.tweet_id and n.group and here(n.group)]
    if not asked:
        return set()
    specs = [ReadSpec(n.group or "", f"{rows[n.kind]}:{n.tweet_id}", (n.actor,)) for n in asked]
    gone = {n.id for n, row in zip(asked, session.multi_read(specs), strict=True) if n.actor not in row}
    newest: dict[tuple[str, str, str | None], str] = {}
    for n in asked:  # newest first, as listed
        newest.setdefault((n.kind, n.actor, n.tweet_id), n.id)
    return gone | {n.id for n in asked if newest[(n.kind, n.actor, n.tweet_id)] != n.id}


def mark_seen(session: Session, user: str, group: str, newest: str) -> None:
    """Everything up to ``newest`` is read (a later mark is never moved back: the read that
    chose ``newest`` saw the mark)."""
    session.write(group, seen_row(user), {"seen": newest})
