"""Likes and reposts on Chirp's data layer (webapp/social.py): each counted once, its notice
to the author (never to oneself), a repost decided by a strong register."""

from __future__ import annotations

import time
from dataclasses import replace

from causal_client import Conflict, InsertIfAbsent, Mutation, execute_settled
from causal_client.commands import CompareAndSet
from webapp.notices import Notice, NoticeCell
from webapp.social_core import DELETED_ROW, REPOSTS, UNDONE, SocialCore
from webapp.social_values import (
    Account,
    Entry,
    new_tweet_id,
)


class SocialReactions(SocialCore):
    """Likes, reposts, and what a page shows of them (module doc)."""

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
            claim = execute_settled(self.session, REPOSTS, key, command)  # (a cut-short try: settled)
            if claim.value == fresh:  # set now, or by a try of ours cut short
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
        execute_settled(self.session, REPOSTS, key, CompareAndSet(repost_id, UNDONE + repost_id))
        shared = replace(original, id=repost_id, reposted_by=me.username, original_id=tweet_id)
        now = str(time.time_ns() // 1000)
        mine = Mutation(me.home_group, f"reposted:{me.username}").delete(tweet_id)
        tomb = Mutation(self.accounts, DELETED_ROW).set(repost_id, now)
        theirs = [Mutation(original.group, f"reposters:{tweet_id}").delete(me.username)]
        self.share(me, shared, mine, tomb, removal=True, apart=theirs)
        return True
