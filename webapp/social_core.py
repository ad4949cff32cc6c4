"""The core of Chirp's data layer (webapp/social.py): accounts, posting and its fan-out, lines
and their pages, lookups and tombstones, on one causal session. The schema: social.py."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from causal_client import Mutation, NotReplicatedHere, ReadSpec, Row, Session
from causal_client.wire import MAX_SLICE
from webapp import blocks, notices, profiles, search
from webapp.context import RegionContext
from webapp.notices import NoticeCell
from webapp.social_values import (
    NOBODY,
    Account,
    Author,
    Entry,
    Hidden,
    Lookups,
    NoSuchUser,
    Page,
    Pending,
    Reactions,
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


class SocialCore:
    """Accounts, posts, lines and pages on one causal session (one web request, or one Celery task)."""

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
            claim=row.text("claim") or "", display=row.text("display") or "", bio=row.text("bio") or "",
            avatar=row.text("avatar") or "", sessions_from=int(row.text("sessions_from") or 0),
            deleted_us=int(row.text("deleted") or 0),
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
        return self.present([cell.text for cell in row])

    def present(self, names: list[str]) -> list[str]:
        """``names`` less the accounts deleted (their tombstones, in one read)."""
        gone = self.deleted_among(profiles.account_tombstone(n) for n in names) if names else set()
        return [n for n in names if profiles.account_tombstone(n) not in gone]

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

    # -- tweets ------------------------------------------------------------------------------
    def post(self, author: Account, body: str, reply_to: Entry | None = None) -> Entry:
        """The tweet, the author's userline and timeline (read-your-writes: the poster sees it at
        once), the public line, its pending fan-out (an outbox cell, webapp/fanout.py) and its
        notices (the author it replies to, the people it mentions) in one atomic batch, where
        the author's home group is replicated: all of it or none, whenever this process dies."""
        mentioned = notices.mentioned(body)
        known = self.homes_of(mentioned) if mentioned else {}
        entry = Entry(
            new_tweet_id(), author.username, body, author.home_group,
            reply_to.id if reply_to else None, reply_to.author if reply_to else None,
            reply_to.group if reply_to else None,
            unknown_mentions=tuple(n for n in mentioned if n not in known),
        )  # fmt: skip
        fields = {"author": author.username, "body": body, "entry": entry.to_json()}
        tweet = Mutation(author.home_group, f"tweet:{entry.id}").update(fields)
        # the accounts group is replicated everywhere: wherever the home group is, so is it
        public = Mutation(self.accounts, "public").set(entry.id, entry.to_json())
        found_by = search.index_mutations(self.accounts, entry)  # its tags' and words' rows
        told = notices.for_tweet(
            entry.id, author.username, body, author.home_group, entry.reply_author, new_tweet_id()
        )
        if reply_to is None:
            self.share(author, entry, tweet, public, *found_by, notify=told)
            return entry
        listed = Mutation(reply_to.group, f"replies:{reply_to.id}").set(entry.id, entry.to_json())
        self.share(author, entry, tweet, public, *found_by, notify=told, apart=[listed])
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
        """The tweet (None: none here, deleted, or its author's account deleted: what a deleted
        account wrote is gone everywhere its tombstone is, webapp/profiles.py)."""
        entry = tweet_of(tweet_id, self.session.read(group, f"tweet:{tweet_id}", ["entry", "deleted"]))
        if entry is None or self.authors_left([entry]):
            return None
        return entry

    def authors_left(self, entries: Iterable[Entry]) -> set[str]:
        """The authors of ``entries`` whose accounts were deleted, as far as this region knows
        (read after the entries, so a tombstone that came before them is seen)."""
        names = {e.author for e in entries}
        gone = self.deleted_among(profiles.account_tombstone(name) for name in names)
        return {name for name in names if profiles.account_tombstone(name) in gone}

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

    def page_of(
        self, row: Row, limit: int = PAGE_SIZE, me: Account | None = None, muted_shown: str = "",
        home: bool = False,
    ) -> Page:  # fmt: skip
        """A page of a line without what was deleted or ``me`` must not see (``muted_shown``:
        a user ``me`` mutes whose own page this is, which shows them), with the tweets its
        replies answer and the likes, reposts and replies of its tweets as ``me`` sees them,
        in one more read."""
        entries = entries_of(row)
        more = len(entries) > limit
        entries = entries[:limit]
        return self.page_of_entries(entries, entries[-1].id if more else None, me, muted_shown, home)

    def page_of_entries(
        self, entries: list[Entry], next_cursor: str | None, me: Account | None = None, muted_shown: str = "",
        home: bool = False,
    ) -> Page:  # fmt: skip
        """``page_of`` for entries already read (a search's, filtered); ``home``: ``me``'s home
        timeline, which leaves out the posters ``me`` no longer follows."""
        found = self.lookups(entries, me, react=True, home=home)
        gone, hidden = found.gone, found.hidden
        if muted_shown in hidden.mutes:
            hidden = replace(hidden, mutes=hidden.mutes - {muted_shown})
        shown = one_per_tweet([
            e for e in entries
            if not gone_from(e, gone) and not hidden.hides(e) and e.poster not in found.unfollowed
        ])  # fmt: skip
        deleted_originals = frozenset(gone & set(found.originals))
        newest = entries[0].id if entries else ""
        return Page(
            shown, next_cursor, found.originals, deleted_originals, found.reactions, newest, found.authors
        )

    def lookups(
        self, entries: Sequence[Entry], me: Account | None = None, react: bool = False, home: bool = False
    ) -> Lookups:
        """In one read: which of these entries (tweets or reposts) and of the tweets they reply
        to were deleted (their tombstones), those tweets themselves (None: not here, or
        deleted), whom ``me`` must not see (webapp/blocks.py: read after the entries, so it
        holds every block their posts came after) and, with ``react``, the entries' reactions."""
        region = self.session.region
        ids: set[str] = set()
        for e in entries:  # the tweets, what they answer, and their authors' accounts (deleted?)
            ids.update((e.id, e.tweet_id, *((e.reply_to,) if e.reply_to else ())))
            ids.update(profiles.account_tombstone(name) for name in (e.author, e.reposted_by) if name)
        checked = self.tombstone_specs(ids)
        wanted = {e.reply_to: e.reply_group for e in entries if e.reply_to and e.reply_group}
        local = [(i, g) for i, g in wanted.items() if self.ctx.replicates(g, region)]
        specs = checked + [ReadSpec(g, f"tweet:{i}", ("entry",)) for i, g in local]
        reacting, parse = self.reaction_specs(entries, me) if react else ([], None)
        authors = sorted({e.author for e in entries}) if react else []
        reacting = [
            ReadSpec(self.accounts, f"account:{a}", ("display", "avatar")) for a in authors
        ] + reacting
        posters = sorted({e.poster for e in entries} - {me.username}) if home and me is not None else []
        if posters and me is not None:  # which of them ``me`` follows now
            reacting = [ReadSpec(me.home_group, f"following:{me.username}", tuple(posters)), *reacting]
        if me is not None:
            reacting = [blocks.hidden_spec(self.accounts, me.username), *reacting]
        rows = self.session.multi_read(specs + reacting) if specs or reacting else []
        gone = {cell.column for row in rows[: len(checked)] for cell in row}
        found: dict[str, Entry | None] = dict.fromkeys(wanted)
        for (tweet_id, _), row in zip(local, rows[len(checked) : len(specs)], strict=True):
            found[tweet_id] = tweet_of(tweet_id, row) if tweet_id not in gone else None
        rest = rows[len(specs) :]
        hidden = NOBODY
        if me is not None:
            hidden, rest = blocks.hidden_of(rest[0]), rest[1:]
        unfollowed: set[str] = set()
        if posters:
            unfollowed, rest = set(posters) - {cell.column for cell in rest[0]}, rest[1:]
        seen_as = zip(authors, rest[: len(authors)], strict=True)
        shown_as = {a: Author(row.text("display") or "", row.text("avatar") or "") for a, row in seen_as}
        rest = rest[len(authors) :]
        reactions = parse(rest) if parse is not None else None
        self._drop_parents_of_left_authors(found, gone, ids)
        return Lookups(gone, found, reactions, hidden, shown_as, unfollowed)

    def _drop_parents_of_left_authors(
        self, found: dict[str, Entry | None], gone: set[str], ids: set[str]
    ) -> None:
        """A tweet answered here whose author deleted the account is shown as a deleted tweet: not
        quoted, its id among ``gone``. Its author is known only once it is read, so their
        tombstones take one more read, where one was not read already (in ``ids``)."""
        parents = {tweet_id: e for tweet_id, e in found.items() if e is not None}
        unread = {profiles.account_tombstone(e.author) for e in parents.values()} - ids
        if unread:
            gone |= self.deleted_among(unread)
        for tweet_id, e in parents.items():
            if profiles.account_tombstone(e.author) in gone:
                found[tweet_id] = None
                gone.add(tweet_id)

    def hidden(self, me: Account | None) -> Hidden:
        """Whom ``me`` blocks, is blocked by and mutes (nobody for a visitor)."""
        if me is None:
            return NOBODY
        return blocks.hidden_of(self.session.multi_read([blocks.hidden_spec(self.accounts, me.username)])[0])

    def tombstone_specs(self, ids: Iterable[str]) -> list[ReadSpec]:
        """The read of the tombstones of ``ids`` (tweet or repost ids), if any."""
        columns = tuple(sorted(set(ids)))
        return [ReadSpec(self.accounts, DELETED_ROW, columns)] if columns else []

    def deleted_among(self, ids: Iterable[str]) -> set[str]:
        """Which of ``ids`` were deleted (or are undone reposts), as far as this region knows."""
        specs = self.tombstone_specs(ids)
        return {cell.column for row in self.session.multi_read(specs) for cell in row} if specs else set()

    def timeline(self, account: Account, after: str | None = None) -> Page:
        """The home timeline: one's own and followed users' tweets and reposts; those of users
        unfollowed since stay in the row and are left out here (read with the page)."""
        row = self.session.slice(
            account.home_group, f"timeline:{account.username}", limit=PAGE_SIZE + 1, after=after
        )
        return self.page_of(row, PAGE_SIZE, account, home=True)

    def userline(self, account: Account, after: str | None = None, me: Account | None = None) -> Page:
        return self.line(account.home_group, f"userline:{account.username}", after, me=me)

    def public(self, after: str | None = None, me: Account | None = None) -> Page:
        return self.line(self.accounts, "public", after, me=me)

    # -- finding (webapp/search.py) -------------------------------------------------------------
    def tag_line(self, tag: str, after: str | None = None, me: Account | None = None) -> Page:
        """A hashtag's tweets, newest first: a line like a timeline."""
        return self.line(self.accounts, search.tag_row(tag), after, me=me)

    def search(self, query: search.Query, after: str | None = None, me: Account | None = None) -> Page:
        """The tweets with every word and tag of ``query``, newest first: a page of the rarest
        term's row, less those lacking another term, then as any line (tombstones, blocks)."""
        row = self.session.slice(self.accounts, query.row, limit=search.SCANNED_PER_PAGE + 1, after=after)
        read = entries_of(row)
        more = len(read) > search.SCANNED_PER_PAGE
        read = read[: search.SCANNED_PER_PAGE]
        matched = [e for e in read if query.matches(e)]
        if len(matched) > PAGE_SIZE:
            return self.page_of_entries(matched[:PAGE_SIZE], matched[PAGE_SIZE - 1].id, me)
        return self.page_of_entries(matched, read[-1].id if more else None, me)

    def people_named(self, part: str) -> list[str]:
        """Usernames containing ``part``, among the newest PEOPLE_SCANNED (webapp/search.py),
        read a page of the directory at a time."""
        names: list[str] = []
        after = None
        while len(names) < search.PEOPLE_SCANNED:
            page = self.session.slice(self.accounts, "directory", limit=MAX_SLICE, after=after)
            names += [cell.text for cell in page]
            if not page.next_cursor or len(page.cells) < MAX_SLICE:
                break
            after = page.next_cursor
        return self.present(search.matching_names(names, part))

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


def gone_from(entry: Entry, gone: set[str]) -> bool:
    """Whether a line leaves the entry out as deleted: the tweet or the repost was, or the
    account of its author or reposter was (webapp/profiles.py)."""
    if {entry.id, entry.tweet_id} & gone:
        return True
    names = (entry.author, entry.reposted_by) if entry.reposted_by else (entry.author,)
    return any(profiles.account_tombstone(name) in gone for name in names)
