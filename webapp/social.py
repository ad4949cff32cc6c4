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

import time
from collections.abc import Sequence
from dataclasses import replace

from causal_client import Mutation, ReadSpec
from webapp import blocks, pins, search
from webapp.notices import Notice, NoticeCell
from webapp.social_core import ANCESTORS, BACKFILL, DELETED_ROW, REPLIES_PAGE, gone_from
from webapp.social_profiles import SocialProfiles
from webapp.social_values import (
    NOBODY,
    Account,
    BlockedApart,
    Conversation,
    Entry,
    Page,
    Profile,
    TweetDeleted,
    entries_of,
    new_tweet_id,
    tweet_of,
)

SUGGESTIONS = 8  # people suggested to follow
SUGGESTION_SOURCES = 10  # followed users whose follows a suggestion reads
SUGGESTIONS_READ = 50  # of each one's following row


class Social(SocialProfiles):
    """The app's operations on one causal session (one web request, or one Celery task)."""

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
        unlisted = search.index_mutations(self.accounts, entry, removal=True)
        self.share(me, entry, tomb, Mutation(self.accounts, DELETED_ROW).set(entry.id, now),
                   Mutation(self.accounts, "public").delete(entry.id), *unlisted, removal=True,
                   apart=apart)  # fmt: skip

    # -- conversations -----------------------------------------------------------------------
    def conversation(
        self, group: str, tweet_id: str, after: str | None = None, me: Account | None = None
    ) -> Conversation | None:
        """A tweet and a page of its replies, oldest first, in one snapshot (a reply listed here
        never lacks the tweet it answers), less deleted replies and those ``me`` must not see,
        then the tweets it replies to, up the chain, each read where its group is replicated
        here. None: no such tweet here; TweetDeleted: it was deleted; BlockedApart: its author
        and ``me`` block one another (read in the same snapshot: webapp/blocks.py)."""
        replies = ReadSpec(group, f"replies:{tweet_id}", limit=REPLIES_PAGE + 1, after=after, reverse=False)
        specs = [ReadSpec(group, f"tweet:{tweet_id}", ("entry", "deleted")), replies]
        if me is not None:
            specs.append(blocks.hidden_spec(self.accounts, me.username))
        tweet_row, replies_row, *hidden_row = self.session.multi_read(specs)
        hidden = blocks.hidden_of(hidden_row[0]) if hidden_row else NOBODY
        if "deleted" in tweet_row:
            raise TweetDeleted(tweet_id)
        tweet = tweet_of(tweet_id, tweet_row)
        if tweet is None:
            return None
        if tweet.author in hidden.apart:
            raise BlockedApart(tweet.author, tweet.author in hidden.blocked_by)
        listed = entries_of(replies_row)
        more = len(listed) > REPLIES_PAGE
        listed = listed[:REPLIES_PAGE]
        if listed:
            gone = self.lookups(listed).gone
            shown = [e for e in listed if not gone_from(e, gone) and not hidden.hides(e)]
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
            if parent.author in hidden.apart:  # not shown to this reader: the chain stops here
                talk.cut = True
                break
            up = parent
            talk.ancestors.append(up)
        self._leave_out_left_authors(talk)
        talk.ancestors.reverse()
        return talk

    def _leave_out_left_authors(self, talk: Conversation) -> None:
        """A deleted account's tweet is gone (TweetDeleted, a 410 as for a deleted tweet); up
        its chain, the first one whose author left ends the chain as a deleted tweet would."""
        left = self.authors_left([talk.tweet, *talk.ancestors])
        if talk.tweet.author in left:
            raise TweetDeleted(talk.tweet.id)
        for i, up in enumerate(talk.ancestors):  # (nearest first)
            if up.author in left:
                del talk.ancestors[i:]
                talk.cut, talk.parent_gone = True, True
                break

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
        asked_here = asker is not None and self.ctx.replicates(asker.home_group, home)
        if asker is not None and asked_here:
            specs.append(ReadSpec(asker.home_group, f"following:{asker.username}", (user.username,)))
        if me is not None:
            specs.append(blocks.hidden_spec(self.accounts, me.username))
        rows = self.session.multi_read(specs)
        found = self.account_from(user.username, rows[0]) or user
        userline = rows[1]
        hidden = blocks.hidden_of(rows[-1]) if me is not None else NOBODY
        counts = replace(found, tweets=userline.size, followers=rows[2].size, following=rows[3].size)
        if user.username in hidden.apart:  # blocked either way: none of their tweets
            return Profile(counts, Page([], None), False, [], hidden)
        page = self.page_of(userline, me=me, muted_shown=user.username)
        following = (
            user.username in rows[5]
            if asked_here
            else asker is not None and self.is_following(asker, user.username)
        )
        pinned = self.pinned_tweets(pins.from_copy(rows[4]))
        return Profile(counts, page, bool(following), pinned, hidden)

    # -- who to follow ----------------------------------------------------------------------
    def suggestions(self, me: Account, limit: int = SUGGESTIONS) -> list[str]:
        """People ``me`` might follow: those the people ``me`` follows follow, the most followed
        of them first (in one read of up to SUGGESTION_SOURCES of their following rows, those
        replicated here), then the people active in ``me``'s region, then the newest people;
        never ``me``, nobody ``me`` follows already, and nobody blocked either way."""
        follows = self.names(me.home_group, f"following:{me.username}", limit=1000)
        hidden = self.hidden(me)
        skip = {me.username, *follows, *hidden.apart}
        region = self.session.region
        sources = [(n, g) for n, g in sorted(follows.items()) if self.ctx.replicates(g, region)]
        sources = sources[:SUGGESTION_SOURCES]
        counted: dict[str, int] = {}
        if sources:
            specs = [ReadSpec(g, f"following:{n}", limit=SUGGESTIONS_READ) for n, g in sources]
            rows = self.session.multi_read(specs)
            for row in rows:
                for cell in row:
                    if cell.column not in skip:
                        counted[cell.column] = counted.get(cell.column, 0) + 1
        ranked = sorted(counted, key=lambda name: (-counted[name], name))
        for name in [*self.active_near(me), *self.newest_people(limit=limit * 3)]:
            if name not in skip and name not in ranked:
                ranked.append(name)
        return ranked[:limit]

    def active_near(self, me: Account, scanned: int = 100) -> list[str]:
        """Who posted lately from ``me``'s home group (the public line's newest entries): the
        active people of one's region, the newest poster first."""
        entries = entries_of(self.session.slice(self.accounts, "public", limit=scanned))
        posters = dict.fromkeys(e.author for e in entries if e.group == me.home_group and not e.reposted_by)
        return self.present(list(posters))

    # -- blocking and muting (webapp/blocks.py) -----------------------------------------------
    def block(self, me: Account, them: Account, undo: bool = False) -> None:
        """``me`` blocks ``them`` (``undo``: unblocks): both users' ``hidden`` rows and, for a
        block, the follows both ways gone, in one atomic batch where some region replicates it
        all (the ``hidden`` rows first otherwise): a post ``me`` makes after it is causally
        after the block wherever it is read."""
        self.together(blocks.block_mutations(self.accounts, me, them, undo))

    def mute(self, me: Account, them: str, undo: bool = False) -> None:
        """``me`` mutes ``them`` (``undo``: unmutes): only ``me``'s own pages read it."""
        self.session.batch([blocks.mute_mutation(self.accounts, me, them, undo)])

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
