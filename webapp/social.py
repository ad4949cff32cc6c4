"""The Twitter clone's data on the causal store: Twissandra's schema as rows of columns.

Rows (group in brackets; "home" is the user's home group, see RegionContext.home_group):

    account:<user>     [accounts]  password hash, home group, joined (the tweet, follower and
                                   following counts are the sizes of the rows they count)
    directory          [accounts]  "<joined µs>|<user>" -> user: the newest people first
    sessions-ended     [accounts]  browser session family -> when it was signed out (webapp/causal.py)
    public             [accounts]  tweet id -> entry: the public line
    tweet:<id>         [author's home]  author, body, time, reply-to
    userline:<user>    [home]  tweet id -> entry (the user's own tweets)
    timeline:<user>    [home]  tweet id -> entry (own + followed users' tweets; fan-out writes it)
    following:<user>   [home]  followed user -> their home group
    followers:<user>   [home]  follower -> their home group
    outbox:<region>    [home, or a follower's home]  tweet id -> pending fan-out (webapp/fanout.py)
    replies:<id>       [the tweet's group]  reply id -> the reply's entry (written in the reply's batch)
    likers:<id>        [the tweet's group]  user -> their home group (a like)
    reposters:<id>     [the tweet's group]  user -> the id of their repost
    liked:<user>       [home]  tweet id -> its group
    reposted:<user>    [home]  tweet id -> the id of the repost
    deleted            [accounts]  tweet id, or id of an undone repost -> when (tombstones)
    notices:<user>     [home]  notifications (webapp/notices.py)

A repost is an entry of its own (a new id, so it sorts by when it was shared) carrying the
original's author, body and group, and ``reposted_by``; it reaches the reposter's followers
through the outbox like a tweet. Replies, likes and reposts are counted as the sizes of their
rows. A tweet's page is its conversation: the tweets it replies to, up the chain, and its
replies, oldest first, read with the tweet in one snapshot, so a region that lists a reply can
always show what it answers (the cell names it, and causality brings the tweet first).

Deletes leave tombstones: a deleted tweet's row keeps only ``deleted``, and its id goes into the
``deleted`` row of the accounts group (replicated everywhere, so every region can check any
tweet) in the same batch as its removal from the author's lines and the public line; its
parent's replies lose it in that batch or right after, its followers' timelines and its
reposts through the outbox (a removal cell). Every page reads the tombstones of what it shows,
in the read that looks up the originals, and a fan-out cell drained after the delete turns into
a removal, so a write that comes late never brings a deleted tweet back. An undone repost is
tombstoned the same way, by the id of the repost (the next repost of the tweet gets a new id).

Tweet ids sort by time (hex µs + random), so a row's columns read newest first, and the store's
exclusive cursor pages through them. Timeline entries carry the tweet (denormalised, as in
twissandra-j), so a timeline page is one read; replies name their original, which the page looks
up in one more read to show it (or to say it is not visible here: the anomaly `eventual` allows).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from causal_client import Conflict, InsertIfAbsent, Mutation, NotReplicatedHere, ReadSpec, Row, Session
from causal_client.commands import CompareAndSet
from webapp import notices, pins
from webapp.context import RegionContext
from webapp.notices import Notice, NoticeCell
from webapp.social_values import (
    Account,
    Conversation,
    Entry,
    Lookups,
    NoSuchUser,
    Page,
    Pending,
    Profile,
    Reactions,
    TweetDeleted,
    entries_of,
    new_tweet_id,
    one_per_tweet,
    outbox_row,
    placed,
    tweet_of,
)

PAGE_SIZE = 40  # as Twissandra
MAX_TWEET_CHARS = 280
USERNAME_PATTERN = re.compile(r"^(?=.*[a-z0-9])[a-z0-9_]{2,30}$")  # not underscores alone
FANOUT_CHUNK = 100  # timeline writes per Batch call (Stream-Framework's fanout_chunk_size)
ENDED_ROW = "sessions-ended"
REPOSTS = "repost"  # strong registers' namespace: "<user>/<tweet id>" -> the repost's id
BACKFILL = 20  # a newly followed user's latest tweets copied into the follower's home timeline
REPLIES_PAGE = 50  # replies on a tweet's page, oldest first
ANCESTORS = 20  # how far up a reply chain a tweet's page reads
OWN_LINES = ("userline", "timeline")  # a poster's lines that get their own tweets and reposts
DELETED_ROW = "deleted"  # tombstones, in the accounts group: tweet id (or undone repost id) -> when
UNDONE = "-"  # a repost register holding "-<id>": that repost was undone


class Social:
    """The app's operations on one causal session (one web request, or one Celery task)."""

    def __init__(
        self, ctx: RegionContext, session: Session, queued: list[tuple[str, str, str]] | None = None
    ):
        self.ctx = ctx
        self.session = session
        self.accounts = ctx.accounts_group
        #: the outbox cells written, as (region, group, column): worth a nudge (a request's list)
        self.queued: list[tuple[str, str, str]] = queued if queued is not None else []

    # -- accounts ----------------------------------------------------------------------------
    def account_spec(self, username: str) -> ReadSpec:
        return ReadSpec(self.accounts, f"account:{username}")

    @staticmethod
    def account_from(username: str, row: Row) -> Account | None:
        if "password" not in row:
            return None
        return Account(
            username, row.text("password") or "", row.text("home") or "", int(row.text("joined") or 0),
            claim=row.text("claim") or "",
        )  # fmt: skip

    def account(self, username: str, family: str | None = None) -> Account:
        """The account; with ``family`` (a browser session's), also whether that session was
        signed out (``Account.ended``), in the same read."""
        return self.account_reading(username, family)[0]

    def account_reading(
        self, username: str, family: str | None = None, also: Sequence[ReadSpec] = ()
    ) -> tuple[Account, list[Row]]:
        """``account``, and the rows of ``also`` read with it (one read for a page's header)."""
        specs = [self.account_spec(username)]
        if family:
            specs.append(ReadSpec(self.accounts, ENDED_ROW, (family,)))
        rows = self.session.multi_read([*specs, *also])
        found = self.account_from(username, rows[0])
        if found is None:
            raise NoSuchUser(username)
        return replace(found, ended=bool(family) and family in rows[1]), rows[len(specs) :]

    def homes_of(self, names: Sequence[str]) -> dict[str, str]:
        """The home groups of these users, in one read (a name with no account left out)."""
        rows = self.session.multi_read([self.account_spec(name) for name in names])
        return {name: home for name, row in zip(names, rows, strict=True) if (home := row.text("home"))}

    def end_sessions(self, family: str) -> None:
        """Signs out a browser session everywhere: every region's copy of its cookie (it travels)
        is refused once this write is visible there."""
        self.session.write(self.accounts, ENDED_ROW, {family: str(time.time_ns() // 1000)})

    def create_account(self, username: str, password_hash: str, home_group: str, claim: str = "") -> Account:
        """The account row (with the token its name's register holds, webapp/accounts.py) and a
        directory entry, after the username was claimed."""
        joined = time.time_ns() // 1000
        self.session.batch([
            Mutation(self.accounts, f"account:{username}").update(
                {"password": password_hash, "home": home_group, "joined": str(joined), "claim": claim}
            ),
            Mutation(self.accounts, "directory").set(f"{joined:016d}|{username}", username),
        ])  # fmt: skip
        return Account(username, password_hash, home_group, joined, claim=claim)

    def newest_people(self, limit: int = 20) -> list[str]:
        row = self.session.slice(self.accounts, "directory", limit=limit)
        return [cell.text for cell in row]

    # -- tweets ------------------------------------------------------------------------------
    def post(self, author: Account, body: str, reply_to: Entry | None = None) -> Entry:
        """The tweet, the author's userline and timeline (read-your-writes: the poster sees it at
        once), the public line, its pending fan-out (an outbox cell, webapp/fanout.py) and its
        notices (the author it replies to, the people it mentions) in one atomic batch, where
        the author's home group is replicated: all of it or none, whenever this process dies."""
        entry = Entry(
            new_tweet_id(), author.username, body, author.home_group,
            reply_to.id if reply_to else None, reply_to.author if reply_to else None,
            reply_to.group if reply_to else None,
        )  # fmt: skip
        fields = {"author": author.username, "body": body, "entry": entry.to_json()}
        tweet = Mutation(author.home_group, f"tweet:{entry.id}").update(fields)
        # the accounts group is replicated everywhere: wherever the home group is, so is it
        public = Mutation(self.accounts, "public").set(entry.id, entry.to_json())
        told = notices.for_tweet(
            entry.id, author.username, body, author.home_group, entry.reply_author, new_tweet_id()
        )
        if reply_to is None:
            self.share(author, entry, tweet, public, notify=told)
            return entry
        listed = Mutation(reply_to.group, f"replies:{reply_to.id}").set(entry.id, entry.to_json())
        self.share(author, entry, tweet, public, notify=told, apart=[listed])
        return entry

    def share(
        self, poster: Account, entry: Entry, *also: Mutation,
        notify: Sequence[NoticeCell] = (), apart: Sequence[Mutation] = (), removal: bool = False,
    ) -> None:  # fmt: skip
        """``entry`` into the poster's userline and home timeline (``removal``: out of them) with
        its pending fan-out (an outbox cell), its notices and ``also``, in one atomic batch where
        the poster's home group and the groups of ``also`` are replicated; the session ends
        there, where the outbox cells are. ``apart``: mutations of groups that are in the batch
        where some region replicates them with the rest, else written right after, causally
        (partial replication)."""
        home = poster.home_group
        if apart and self.ctx.client.closest_with(
            [home, *(m.group for m in (*also, *apart))], self.session.region
        ):
            also, apart = (*also, *apart), ()
        self.go_where_replicated(home, *(m.group for m in also))
        region = self.session.region
        lines = [placed(Mutation(home, f"{line}:{poster.username}"), entry, removal) for line in OWN_LINES]
        pending = Pending(entry, home, removal=removal)
        self.session.batch([*also, *lines, pending.mutation(region), *self.notice_cells(notify, home)])
        self.queued.append((region, home, pending.column))
        if apart:
            self.together(apart)

    def notice_cells(self, cells: Sequence[NoticeCell], group: str) -> list[Mutation]:
        """``cells`` as outbox cells of the session's region in ``group`` (replicated there),
        queued for a nudge once written."""
        self.queued += [(self.session.region, group, cell.column) for cell in cells]
        return [cell.mutation(group, outbox_row(self.session.region)) for cell in cells]

    def together(
        self, mutations: Sequence[Mutation], notify: Sequence[NoticeCell] = (), home: str = ""
    ) -> None:
        """One atomic batch where every group it touches is replicated (migrating there if need
        be), with ``notify``'s outbox cells in ``home`` (one of those groups). Where no region
        replicates them all (partial replication), each group's part is a batch of its own, in
        order, and the parts may be seen apart."""
        groups = list(dict.fromkeys(m.group for m in mutations))
        if self.ctx.client.closest_with(groups, self.session.region) is not None:
            self.go_where_replicated(*groups)
            self.session.batch([*mutations, *self.notice_cells(notify, home)])
            return
        for group in groups:
            part = [m for m in mutations if m.group == group]
            if group == home and notify:
                self.go_where_replicated(home)
                part += self.notice_cells(notify, home)
            self.session.batch(part)

    def publish(self, entry: Entry) -> None:
        """The entry on the public line (idempotent: the same cell set again)."""
        self.session.write(self.accounts, "public", {entry.id: entry.to_json()})

    def go_where_replicated(self, *groups: str) -> str:
        """Migrates the session, if it must, to the closest region replicating all ``groups``."""
        if not all(self.ctx.replicates(g, self.session.region) for g in groups):
            target = self.ctx.client.closest_with(list(groups), self.session.region)
            if target is None:
                raise NotReplicatedHere(f"no region replicates all of {', '.join(groups)}", groups[0])
            self.session.migrate(target)
        return self.session.region

    def tweet(self, group: str, tweet_id: str) -> Entry | None:
        """The tweet (None: none here, or deleted)."""
        return tweet_of(tweet_id, self.session.read(group, f"tweet:{tweet_id}", ["entry", "deleted"]))

    def line(
        self,
        group: str,
        row: str,
        after: str | None = None,
        limit: int = PAGE_SIZE,
        me: Account | None = None,
    ) -> Page:
        """A page of a line, as ``me`` sees it; one entry more is read to know whether an older
        page exists."""
        return self.page_of(self.session.slice(group, row, limit=limit + 1, after=after), limit, me)

    @staticmethod
    def line_spec(group: str, row: str, after: str | None = None, limit: int = PAGE_SIZE) -> ReadSpec:
        return ReadSpec(group, row, limit=limit + 1, after=after)

    def page_of(self, row: Row, limit: int = PAGE_SIZE, me: Account | None = None) -> Page:
        """A page of a line without what was deleted, with the tweets its replies answer and
        the likes, reposts and replies of its tweets as ``me`` sees them, in one more read."""
        entries = entries_of(row)
        more = len(entries) > limit
        entries = entries[:limit]
        found = self.lookups(entries, me, react=True)
        gone = found.gone
        shown = one_per_tweet([e for e in entries if not ({e.id, e.tweet_id} & gone)])
        deleted_originals = frozenset(gone & set(found.originals))
        next_cursor = entries[-1].id if more else None
        newest = entries[0].id if entries else ""
        return Page(shown, next_cursor, found.originals, deleted_originals, found.reactions, newest)

    def lookups(self, entries: Sequence[Entry], me: Account | None = None, react: bool = False) -> Lookups:
        """In one read: which of these entries (tweets or reposts) and of the tweets they reply
        to were deleted (their tombstones), those tweets themselves (None: not here, or
        deleted) and, with ``react``, the entries' reactions."""
        region = self.session.region
        ids: set[str] = set()
        for e in entries:
            ids.update((e.id, e.tweet_id, *((e.reply_to,) if e.reply_to else ())))
        checked = self.tombstone_specs(ids)
        wanted = {e.reply_to: e.reply_group for e in entries if e.reply_to and e.reply_group}
        local = [(i, g) for i, g in wanted.items() if self.ctx.replicates(g, region)]
        specs = checked + [ReadSpec(g, f"tweet:{i}", ("entry",)) for i, g in local]
        reacting, parse = self.reaction_specs(entries, me) if react else ([], None)
        rows = self.session.multi_read(specs + reacting) if specs or reacting else []
        gone = {cell.column for row in rows[: len(checked)] for cell in row}
        found: dict[str, Entry | None] = dict.fromkeys(wanted)
        for (tweet_id, _), row in zip(local, rows[len(checked) : len(specs)], strict=True):
            found[tweet_id] = tweet_of(tweet_id, row) if tweet_id not in gone else None
        reactions = parse(rows[len(specs) :]) if parse is not None else None
        return Lookups(gone, found, reactions)

    def tombstone_specs(self, ids: Iterable[str]) -> list[ReadSpec]:
        """The read of the tombstones of ``ids`` (tweet or repost ids), if any."""
        columns = tuple(sorted(set(ids)))
        return [ReadSpec(self.accounts, DELETED_ROW, columns)] if columns else []

    def deleted_among(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` were deleted (or are undone reposts), as far as this region knows."""
        specs = self.tombstone_specs(ids)
        return {cell.column for row in self.session.multi_read(specs) for cell in row} if specs else set()

    def timeline(self, account: Account, after: str | None = None) -> Page:
        return self.line(account.home_group, f"timeline:{account.username}", after, me=account)

    def userline(self, account: Account, after: str | None = None, me: Account | None = None) -> Page:
        return self.line(account.home_group, f"userline:{account.username}", after, me=me)

    def public(self, after: str | None = None, me: Account | None = None) -> Page:
        return self.line(self.accounts, "public", after, me=me)

    # -- likes and reposts -------------------------------------------------------------------
    def like(self, me: Account, entry: Entry, undo: bool = False) -> bool:
        """Likes (or unlikes) a tweet: the liker's cell in its likers row, where the tweet lives,
        and the tweet in the liker's own liked row; a like also notifies the author. Idempotent:
        a double click counts (and notifies) once. Returns whether anything changed."""
        tweet_id = entry.tweet_id
        likers, liked = (
            Mutation(entry.group, f"likers:{tweet_id}"),
            Mutation(me.home_group, f"liked:{me.username}"),
        )
        before = me.username in self.session.read(entry.group, likers.row, [me.username])
        if undo:
            if before:
                self.together([likers.delete(me.username), liked.delete(tweet_id)])
            return before
        if before:
            return False
        told = self.notice("like", me, entry)
        both = [likers.set(me.username, me.home_group), liked.set(tweet_id, entry.group)]
        self.together(both, told, me.home_group)
        return True

    @staticmethod
    def notice(kind: str, me: Account, entry: Entry, notice_id: str | None = None) -> list[NoticeCell]:
        """The notice to ``entry``'s author that ``me`` did ``kind`` to it (none to oneself)."""
        if entry.author == me.username:
            return []
        made = Notice(notice_id or new_tweet_id(), kind, me.username, entry.tweet_id, entry.group, entry.body)
        return [NoticeCell(made, (entry.author,))]

    def repost(self, me: Account, entry: Entry) -> Entry | None:
        """Reposts a tweet into the reposter's userline, home timeline and, through the outbox,
        the reposter's followers' timelines, and notifies its author; None if this user reposted
        it already. Once per user and tweet, even from two tabs or two regions at once: the
        repost's id is claimed (an insert-if-absent on a strong register, decided by a majority
        of the regions; a register left "-<id>" by an undo is compared-and-set), so a racing
        second try writes the same cells again, and a try that died before writing is finished
        with its id. Reposts made before the registers are known by the reposter's row."""
        original = self.original_of(entry)
        tweet_id = original.id
        done = self.session.read(me.home_group, f"reposted:{me.username}", [tweet_id])
        if tweet_id in done:
            return None
        repost_id = self.claim_repost(me, tweet_id)
        shared = replace(original, id=repost_id, reposted_by=me.username, original_id=tweet_id)
        reposted = Mutation(me.home_group, f"reposted:{me.username}").set(tweet_id, shared.id)
        reposters = Mutation(original.group, f"reposters:{tweet_id}").set(me.username, shared.id)
        told = self.notice("repost", me, original, notice_id=repost_id)
        self.share(me, shared, reposted, notify=told, apart=[reposters])
        return shared

    @staticmethod
    def original_of(entry: Entry) -> Entry:
        return replace(entry, reposted_by=None, original_id=None) if entry.reposted_by else entry

    def claim_repost(self, me: Account, tweet_id: str) -> str:
        """The id of ``me``'s repost of ``tweet_id``: a new one, unless a register holds one (a
        racing or an unfinished try); an undone repost's id is never used again."""
        key, fresh = f"{me.username}/{tweet_id}", new_tweet_id()
        command: InsertIfAbsent | CompareAndSet = InsertIfAbsent(fresh)
        for _ in range(4):  # an undo racing each try could keep the register moving
            claim = self.session.execute(REPOSTS, key, command)
            if claim.applied:
                return fresh
            if claim.value is None:  # the register was left empty: only a bug could
                raise Conflict(f"the repost register of {key} is empty")
            if not claim.value.startswith(UNDONE):
                return claim.value  # a racing or an unfinished try's id
            command = CompareAndSet(claim.value, fresh)
        raise Conflict(f"the repost register of {key} keeps changing (reposts and undos racing)")

    def unrepost(self, me: Account, entry: Entry) -> bool:
        """Undoes ``me``'s repost of a tweet: out of the reposter's lines, its reposters row and,
        through the outbox, its followers' timelines; tombstoned by its id, so a fan-out that
        comes late never shows it again. False: not reposted."""
        original = self.original_of(entry)
        tweet_id = original.id
        repost_id = self.session.read(me.home_group, f"reposted:{me.username}", [tweet_id]).text(tweet_id)
        if repost_id is None:
            return False
        key = f"{me.username}/{tweet_id}"
        self.session.execute(REPOSTS, key, CompareAndSet(repost_id, UNDONE + repost_id))
        shared = replace(original, id=repost_id, reposted_by=me.username, original_id=tweet_id)
        now = str(time.time_ns() // 1000)
        mine = Mutation(me.home_group, f"reposted:{me.username}").delete(tweet_id)
        tomb = Mutation(self.accounts, DELETED_ROW).set(repost_id, now)
        theirs = [Mutation(original.group, f"reposters:{tweet_id}").delete(me.username)]
        self.share(me, shared, mine, tomb, removal=True, apart=theirs)
        return True

    def delete(self, me: Account, entry: Entry) -> None:
        """Deletes ``me``'s tweet everywhere: its row keeps only a tombstone, its id goes into
        the ``deleted`` row, and it leaves the author's lines, the public line and its parent's
        replies in the same batch (the parent's part right after where no region has both
        groups); the outbox takes it out of the followers' timelines and takes its reposts
        away (webapp/fanout.py). Idempotent."""
        if entry.author != me.username or entry.reposted_by or entry.group != me.home_group:
            raise PermissionError("only its author deletes a tweet")
        now = str(time.time_ns() // 1000)
        home = me.home_group
        tomb = Mutation(home, f"tweet:{entry.id}").delete("entry", "body", "author").set("deleted", now)
        apart = []
        if entry.reply_to and entry.reply_group:
            apart.append(Mutation(entry.reply_group, f"replies:{entry.reply_to}").delete(entry.id))
        self.share(me, entry, tomb, Mutation(self.accounts, DELETED_ROW).set(entry.id, now),
                   Mutation(self.accounts, "public").delete(entry.id), removal=True, apart=apart)  # fmt: skip

    def react_to(self, entries: Sequence[Entry], me: Account | None) -> dict[str, Reactions]:
        """Likes, reposts and replies of the tweets that ``entries`` show, in one read: those
        whose group is replicated here (the others show none)."""
        specs, parse = self.reaction_specs(entries, me)
        return parse(self.session.multi_read(specs) if specs else [])

    def reaction_specs(
        self, entries: Sequence[Entry], me: Account | None
    ) -> tuple[list[ReadSpec], Callable[[Sequence[Row]], dict[str, Reactions]]]:
        """The reads of ``react_to`` (to fold into another read) and how to parse their rows."""
        tweets = {e.tweet_id: e.group for e in entries if self.ctx.replicates(e.group, self.session.region)}
        if not tweets:
            return [], lambda rows: {}
        counted = ("likers", "reposters", "replies")
        specs = [ReadSpec(g, f"{which}:{t}", limit=1) for t, g in tweets.items() for which in counted]
        mine = me is not None and self.ctx.replicates(me.home_group, self.session.region)
        if me is not None and mine:
            own = (f"liked:{me.username}", f"reposted:{me.username}")
            specs += [ReadSpec(me.home_group, row, tuple(tweets)) for row in own]

        def parse(rows: Sequence[Row]) -> dict[str, Reactions]:
            found = {}
            for i, tweet_id in enumerate(tweets):
                liked = mine and tweet_id in rows[-2]
                reposted = mine and tweet_id in rows[-1]
                likes, reposts, replies = (rows[len(counted) * i + k].size for k in range(len(counted)))
                found[tweet_id] = Reactions(likes, reposts, liked, reposted, replies)
            return found

        return specs, parse

    # -- conversations -----------------------------------------------------------------------
    def conversation(self, group: str, tweet_id: str, after: str | None = None) -> Conversation | None:
        """A tweet and a page of its replies, oldest first, in one snapshot (a reply listed here
        never lacks the tweet it answers), less deleted replies, then the tweets it replies to,
        up the chain, each read where its group is replicated here. None: no such tweet here;
        TweetDeleted: it was deleted."""
        replies = ReadSpec(group, f"replies:{tweet_id}", limit=REPLIES_PAGE + 1, after=after, reverse=False)
        tweet_row, replies_row = self.session.multi_read(
            [ReadSpec(group, f"tweet:{tweet_id}", ("entry", "deleted")), replies]
        )
        if "deleted" in tweet_row:
            raise TweetDeleted(tweet_id)
        tweet = tweet_of(tweet_id, tweet_row)
        if tweet is None:
            return None
        listed = entries_of(replies_row)
        more = len(listed) > REPLIES_PAGE
        listed = listed[:REPLIES_PAGE]
        if listed:
            gone = self.lookups(listed).gone
            shown = [e for e in listed if e.id not in gone]
        else:
            shown = []
        talk = Conversation(tweet, [], shown, listed[-1].id if more else None)
        talk.last_read = listed[-1].id if listed else ""
        up = tweet
        while up.reply_to and up.reply_group:
            here = self.ctx.replicates(up.reply_group, self.session.region)
            if len(talk.ancestors) >= ANCESTORS or not here:
                talk.cut = True
                break
            row = self.session.read(up.reply_group, f"tweet:{up.reply_to}", ["entry", "deleted"])
            parent = tweet_of(up.reply_to, row)
            if parent is None:  # deleted, or (eventual) not here yet
                talk.cut, talk.parent_gone = True, "deleted" in row
                break
            up = parent
            talk.ancestors.append(up)
        talk.ancestors.reverse()
        return talk

    # -- following ---------------------------------------------------------------------------
    def is_following(self, follower: Account, followed: str) -> bool:
        row = self.session.read(follower.home_group, f"following:{follower.username}", [followed])
        return followed in row

    def follow(self, follower: Account, followed: Account) -> None:
        """Both sides and the followed user's notice in one atomic batch (no one-sided follow,
        whenever this process dies), then the followed user's latest tweets into the follower's
        home timeline. No counter: the counts are the sets' sizes (``with_relations``), so
        concurrent and repeated follows count once."""
        told = NoticeCell(Notice(new_tweet_id(), "follow", follower.username), (followed.username,))
        self.together([
            Mutation(follower.home_group, f"following:{follower.username}")
            .set(followed.username, followed.home_group),
            Mutation(followed.home_group, f"followers:{followed.username}")
            .set(follower.username, follower.home_group),
        ], [told], follower.home_group)  # fmt: skip
        self.backfill(follower, followed)

    def backfill(self, follower: Account, followed: Account) -> int:
        """The followed user's latest BACKFILL tweets into the follower's home timeline, as the
        fan-out would have put them there had the follow come first: a new user who follows
        three people and finds an empty home timeline reads it as broken. Read before written,
        so each entry is causally after its tweet."""
        row = f"userline:{followed.username}"
        entries = entries_of(self.session.slice(followed.home_group, row, limit=BACKFILL))
        if entries:
            timeline = Mutation(follower.home_group, f"timeline:{follower.username}")
            for entry in entries:
                timeline.set(entry.id, entry.to_json())
            self.session.batch([timeline])
        return len(entries)

    def unfollow(self, follower: Account, followed: Account) -> None:
        self.together([
            Mutation(follower.home_group, f"following:{follower.username}").delete(followed.username),
            Mutation(followed.home_group, f"followers:{followed.username}").delete(follower.username),
        ])  # fmt: skip

    def names(self, group: str, row: str, limit: int = 1000) -> dict[str, str]:
        """A following/followers row, its first ``limit`` users: user -> their home group."""
        page = self.session.slice(group, row, limit=limit, reverse=False)
        return {cell.column: cell.text for cell in page}

    def all_names(self, group: str, row: str, page_size: int = 1000) -> dict[str, str]:
        """A whole following/followers row, however long, a page (one read) at a time."""
        names: dict[str, str] = {}
        after = None
        while True:
            page = self.session.slice(group, row, limit=page_size, after=after, reverse=False)
            names.update((cell.column, cell.text) for cell in page)
            if not page.next_cursor or len(page.cells) < page_size:
                return names
            after = page.next_cursor

    def profile(self, user: Account, me: Account | None, after: str | None = None) -> Profile:
        """A user's page in one read-only transaction where the user's home group is replicated:
        the account, its counts, a page of its userline and whether ``me`` follows it (when
        ``me``'s home group is there too), all of one moment."""
        home = self.go_where_replicated(user.home_group)
        counted = [
            ReadSpec(user.home_group, f"{w}:{user.username}", limit=1) for w in ("followers", "following")
        ]
        specs = [
            self.account_spec(user.username),
            self.line_spec(user.home_group, f"userline:{user.username}", after),
        ]
        specs += counted
        specs.append(ReadSpec(user.home_group, pins.copy_row(user.username), limit=1))
        asker = me if me is not None and me.username != user.username else None
        if asker is not None and self.ctx.replicates(asker.home_group, home):
            specs.append(ReadSpec(asker.home_group, f"following:{asker.username}", (user.username,)))
        rows = self.session.multi_read(specs)
        found = self.account_from(user.username, rows[0]) or user
        userline = rows[1]
        page = self.page_of(userline, me=me)
        counts = replace(found, tweets=userline.size, followers=rows[2].size, following=rows[3].size)
        following = (
            user.username in rows[5]
            if len(rows) > 5
            else asker is not None and self.is_following(asker, user.username)
        )
        return Profile(counts, page, bool(following), self.pinned_tweets(pins.from_copy(rows[4])))

    def pinned_tweets(self, pinned: Sequence[pins.Pinned]) -> list[Entry]:
        """The pinned tweets that still exist, in one read (they are in their author's home group)."""
        if not pinned:
            return []
        rows = self.session.multi_read([ReadSpec(p.group, f"tweet:{p.tweet_id}", ("entry",)) for p in pinned])
        found = (tweet_of(p.tweet_id, row) for p, row in zip(pinned, rows, strict=True))
        return [tweet for tweet in found if tweet is not None]

    @staticmethod
    def relation_specs(account: Account) -> list[ReadSpec]:
        """The rows whose sizes are an account's counts: userline, followers, following."""
        return [
            ReadSpec(account.home_group, f"{which}:{account.username}", limit=1)
            for which in ("userline", "followers", "following")
        ]

    def with_relations(self, account: Account) -> Account:
        """The account with its counts: the sizes of its userline and of its two sets, in one
        read where they live (the account's home group), so a count always equals its list."""
        rows = self.session.multi_read(self.relation_specs(account))
        return replace(account, tweets=rows[0].size, followers=rows[1].size, following=rows[2].size)

    def followers(self, account: Account) -> dict[str, str]:
        return self.names(account.home_group, f"followers:{account.username}")

    def following(self, account: Account) -> dict[str, str]:
        return self.names(account.home_group, f"following:{account.username}")

    # -- fan-out (run by the Celery task) ------------------------------------------------------
    def write_timelines(
        self, entry: Entry, followers: Iterable[str], group: str, remove: bool = False,
        own_lines_of: str | None = None,
    ) -> int:  # fmt: skip
        """The entry into (``remove``: out of) each follower's timeline (all in ``group``), in
        chunks of one Batch; ``own_lines_of``: also the poster's own userline and timeline."""
        names = sorted(followers)
        if own_lines_of is not None:
            self.session.batch(
                [placed(Mutation(group, f"{line}:{own_lines_of}"), entry, remove) for line in OWN_LINES]
            )
        for start in range(0, len(names), FANOUT_CHUNK):
            chunk = names[start : start + FANOUT_CHUNK]
            self.session.batch([placed(Mutation(group, f"timeline:{name}"), entry, remove) for name in chunk])
        return len(names)
