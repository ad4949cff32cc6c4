"""Chirp's values, as the data layer (webapp/social.py) reads and writes them: a tweet's entry in
a line, its reactions, a fan-out still pending, a page, a conversation, a profile, an account;
tweet ids, and how a line's row becomes entries. Plain data: no store call here."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from causal_client import Mutation, Row


class TweetDeleted(LookupError):
    """The tweet was deleted (its tombstone is visible here)."""


class NoSuchUser(LookupError):
    """No account of that name (or not visible in this region yet)."""


class BlockedApart(PermissionError):
    """The reader and the tweet's author block one another (webapp/blocks.py)."""

    def __init__(self, author: str, blocks_you: bool):
        super().__init__(f"@{author} blocks you" if blocks_you else f"you block @{author}")
        self.author, self.blocks_you = author, blocks_you


def new_tweet_id(now_us: int | None = None) -> str:
    """Sortable by time: 16 hex digits of µs since the epoch, then 6 random hex digits."""
    return f"{now_us or time.time_ns() // 1000:016x}{secrets.token_hex(3)}"


def tweet_time_us(tweet_id: str) -> int:
    return int(tweet_id[:16], 16)


@dataclass(frozen=True)
class Entry:
    """A tweet as it appears in a line (timeline, userline, public line)."""

    id: str
    author: str
    body: str
    group: str  # the author's home group (where tweet:<id> lives)
    reply_to: str | None = None
    reply_author: str | None = None
    reply_group: str | None = None
    reposted_by: str | None = None  # a repost: this user's, of the tweet ``original_id``
    original_id: str | None = None
    #: shown once for several of its reposts in one page: the other reposters (never stored)
    also_reposted_by: tuple[str, ...] = ()
    #: names it mentions that had no account when it was posted: shown as text, not as links
    unknown_mentions: tuple[str, ...] = ()

    @property
    def time_us(self) -> int:
        return tweet_time_us(self.id)

    @property
    def tweet_id(self) -> str:
        """The tweet itself (a repost's original): where its page, likes and reposts are."""
        return self.original_id or self.id

    @property
    def poster(self) -> str:
        """Whose followers get this entry: the reposter's for a repost, else the author's."""
        return self.reposted_by or self.author

    def to_json(self) -> str:
        data: dict[str, str | None] = {"a": self.author, "b": self.body, "g": self.group}
        if self.reply_to:
            data |= {"r": self.reply_to, "ra": self.reply_author, "rg": self.reply_group}
        if self.reposted_by:
            data |= {"rp": self.reposted_by, "o": self.original_id}
        if self.unknown_mentions:
            data["u"] = " ".join(self.unknown_mentions)
        return json.dumps(data, separators=(",", ":"))

    @staticmethod
    def from_json(tweet_id: str, text: str) -> Entry:
        data = json.loads(text)
        return Entry(
            tweet_id, data["a"], data["b"], data["g"], data.get("r"), data.get("ra"), data.get("rg"),
            data.get("rp"), data.get("o"), unknown_mentions=tuple((data.get("u") or "").split()),
        )  # fmt: skip


@dataclass(frozen=True)
class Reactions:
    """A tweet's likes and reposts (the sizes of its likers and reposters rows: exact whatever
    ran twice or concurrently) and whether the reader did either."""

    likes: int = 0
    reposts: int = 0
    liked: bool = False
    reposted: bool = False
    replies: int = 0


def outbox_row(region: str) -> str:
    return f"outbox:{region}"


REMOVAL = "-rm"  # an outbox column ending so is a removal's (its tweet's own cell may still be pending)


@dataclass(frozen=True)
class Pending:
    """One outbox cell: a tweet to write into timelines of ``group`` (or, ``removal``, to take
    out of them: a deleted tweet, an undone repost). ``followers`` None: all of the poster's
    followers (the cell a post or repost writes, in the poster's home group); else these, all
    homed in ``group`` (a part relayed from a region that does not replicate it)."""

    entry: Entry
    group: str
    followers: tuple[str, ...] | None = None
    queued_us: int = 0
    removal: bool = False

    @property
    def column(self) -> str:
        return self.entry.id + (REMOVAL if self.removal else "")

    def mutation(self, region: str) -> Mutation:
        """The cell, in the outbox of ``region`` (which must replicate ``group``)."""
        value: dict[str, object] = {"e": self.entry.to_json(), "q": self.queued_us or time.time_ns() // 1000}
        if self.followers is not None:
            value["f"] = list(self.followers)
        if self.removal:
            value["x"] = 1
        return Mutation(self.group, outbox_row(region)).set(self.column, json.dumps(value))

    @staticmethod
    def parse(group: str, column: str, text: str) -> Pending:
        value = json.loads(text)
        followers = value.get("f")
        entry = Entry.from_json(column.removesuffix(REMOVAL), value["e"])
        followers = tuple(followers) if followers is not None else None
        return Pending(entry, group, followers, int(value["q"]), bool(value.get("x")))


@dataclass
class Page:
    entries: list[Entry]
    next_cursor: str | None
    originals: dict[str, Entry | None] = field(
        default_factory=dict
    )  # reply-to id -> original (None: not here)
    gone: frozenset[str] = frozenset()  # originals that were deleted
    reactions: dict[str, Reactions] | None = None  # read with the page (None: not read)
    newest_read: str = ""  # the newest entry read, shown or not (what a live page counts from)
    authors: dict[str, Author] = field(default_factory=dict)  # read with the page (display name, picture)


@dataclass(frozen=True)
class Author:
    """How a tweet's author is shown: the display name and the uploaded picture's version ("":
    the drawn one), read from the account with the page (webapp/profiles.py)."""

    display: str = ""
    avatar: str = ""


@dataclass(frozen=True)
class Hidden:
    """Whom one reader blocks, is blocked by and mutes."""

    blocks: frozenset[str] = frozenset()
    blocked_by: frozenset[str] = frozenset()
    mutes: frozenset[str] = frozenset()

    @property
    def apart(self) -> frozenset[str]:
        """Blocked either way: nothing passes between them."""
        return self.blocks | self.blocked_by

    @property
    def everyone(self) -> frozenset[str]:
        return self.apart | self.mutes

    def hides(self, entry: Entry) -> bool:
        """Whether a line leaves this entry out: its author, its reposter or (blocked either way)
        the author of the tweet it replies to, which the line would quote."""
        if entry.author in self.everyone or (entry.reposted_by or "") in self.everyone:
            return True
        return (entry.reply_author or "") in self.apart

    def hides_name(self, name: str) -> bool:
        return name in self.everyone


NOBODY = Hidden()


@dataclass
class Lookups:
    """What a page of entries needs besides the entries (``Social.lookups``)."""

    gone: set[str]  # tombstoned ids among the entries and the tweets they reply to
    originals: dict[str, Entry | None]  # reply-to id -> the tweet (None: not here, or deleted)
    reactions: dict[str, Reactions] | None  # tweet id -> its reactions, when asked for
    hidden: Hidden = NOBODY  # whom the reader must not see (webapp/blocks.py), when a reader was given
    authors: dict[str, Author] = field(default_factory=dict)  # the entries' authors, when reacting
    unfollowed: set[str] = field(default_factory=set)  # on a home timeline: posters no longer followed


@dataclass
class Conversation:
    """A tweet's page (``Social.conversation``): what it replies to, oldest first (``ancestors``;
    ``cut`` when the chain goes on in a group not replicated here or beyond ANCESTORS), and a
    page of its replies, oldest first (``next_cursor``: the next page's)."""

    tweet: Entry
    ancestors: list[Entry]
    replies: list[Entry]
    next_cursor: str | None
    cut: bool = False
    parent_gone: bool = False  # the chain stops at a deleted tweet
    last_read: str = ""  # the newest reply read, shown or not (what a live page counts from)


@dataclass
class Profile:
    """What a user's page shows, read at one moment (``Social.profile``)."""

    user: Account
    page: Page
    is_following: bool
    pinned: list[Entry] = field(default_factory=list)  # newest pin first (webapp/pins.py)
    hidden: Hidden = NOBODY  # whom the reader blocks, is blocked by, mutes (the page says which)

    @property
    def apart(self) -> bool:
        """The reader and the user block one another: their tweets are not shown."""
        return self.user.username in self.hidden.apart


@dataclass(frozen=True)
class Account:
    username: str
    password_hash: str
    home_group: str
    joined_us: int
    tweets: int = 0  # the sizes of the rows they count, once read (Social.with_relations)
    followers: int = 0
    following: int = 0
    ended: bool = False  # the browser session that asked was signed out (Social.account)
    claim: str = ""  # the token its name's register holds ("": made before the registers)
    display: str = ""  # the name shown beside @username (webapp/profiles.py)
    bio: str = ""
    avatar: str = ""  # the uploaded picture's version ("": the drawn one)
    sessions_from: int = 0  # µs: browser sessions signed in before are signed out
    deleted_us: int = 0  # µs the account was deleted (0: it was not)


def placed(line: Mutation, entry: Entry, remove: bool = False) -> Mutation:
    """``line`` (a userline or timeline) with ``entry`` set in it, or (``remove``) taken out."""
    return line.delete(entry.id) if remove else line.set(entry.id, entry.to_json())


def tweet_of(tweet_id: str, row: Row) -> Entry | None:
    """The tweet a ``tweet:<id>`` row read with "entry" and "deleted" holds (None: none, or deleted)."""
    text = row.text("entry")
    return Entry.from_json(tweet_id, text) if text and "deleted" not in row else None


def entries_of(row: Row) -> list[Entry]:
    return [Entry.from_json(cell.column, cell.text) for cell in row]


def one_per_tweet(entries: Sequence[Entry]) -> list[Entry]:
    """A page's entries with each tweet once, where it was shared last: a tweet that several
    people one follows reposted (or that one reposted oneself) shows as its newest repost, naming
    the other reposters of the page, not once per repost beside the original."""
    newest: dict[str, Entry] = {}
    reposters: dict[str, list[str]] = {}
    for entry in entries:  # newest first
        newest.setdefault(entry.tweet_id, entry)
        if entry.reposted_by:
            reposters.setdefault(entry.tweet_id, []).append(entry.reposted_by)
    shown = []
    for tweet_id, entry in newest.items():
        others = tuple(n for n in dict.fromkeys(reposters.get(tweet_id, ())) if n != entry.reposted_by)
        shown.append(replace(entry, also_reposted_by=others) if others else entry)
    return shown
