"""Fan-out of a tweet to its author's followers, through an outbox in the causal store.

A post writes the tweet and an outbox cell in one batch (``Social.post``): the cell is the
pending fan-out, and it lives where the tweet does, so nothing acknowledged to the poster rests
on the broker. Draining a cell (``drain``) writes the tweet into every follower's timeline and
then deletes the cell; a Celery task asks for it at once (a nudge), and each region's sweeper
(``Sweeper``, a thread of its Celery worker) drains whatever a nudge did not: a broker that was
down, a worker killed mid-task, a web process that died before it could queue. Draining is
idempotent — a timeline entry is the cell ``timeline:<user>/<tweet id>``, set again to the same
value — so a cell drained twice (nudge and sweeper, or a retry after a crash) still gives every
follower the tweet exactly once.

Causality: the draining session first reads the outbox cell and the tweet, so every timeline
entry it writes is causally after the tweet (and after what the poster had seen). Under partial
replication a follower's timeline lives in the follower's home group, which this region may not
replicate: that part becomes an outbox cell of the closest region that does, written there by a
session that migrated (paper §4.3), and drained by that region like any other.

Rows: ``outbox:<region>`` in a group, one cell per pending tweet (column: the tweet id).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from causal_client import Mutation, ReadSpec, Session
from causal_client.errors import CausalError
from webapp import notices
from webapp.context import RegionContext
from webapp.social import Social
from webapp.social_core import DELETED_ROW
from webapp.social_values import REMOVAL, Pending, outbox_row

log = logging.getLogger("webapp.fanout")

SWEEP_EVERY_S = 1.0  # how often a region's sweeper looks into its outboxes
GRACE_S = 2.0  # a cell younger than this is left to its nudge (a sweep would only repeat it)
SWEEP_PAGE = 100  # cells read per outbox per sweep
BACKOFF_MAX_S = 60.0  # a cell that keeps failing is tried at least this often

Nudge = Callable[[str, str, str], None]  # (region, group, column): ask a region to drain a cell


def drain(ctx: RegionContext, group: str, column: str, send_nudge: Nudge | None = None) -> int:
    """Delivers the outbox cell ``column`` of this region in ``group`` (a tweet's fan-out, a
    deletion's, or a notice), if it is still there, and deletes it; returns the rows written
    here. ``send_nudge(region, group, column)`` asks another region to drain a part relayed to it
    (it would find it by its sweeper anyway)."""
    session = ctx.client.session(ctx.region)
    if notices.is_notice_cell(column):
        cell = read_notice(session, group, column)
        if cell is None:
            return 0
        written = deliver_notice(ctx, session, cell, send_nudge)
    else:
        pending = read_pending(ctx, session, group, column)
        if pending is None:
            return 0  # drained already (by a nudge, the sweeper or a retry)
        written = deliver(ctx, session, pending, send_nudge)
    session.delete(group, outbox_row(ctx.region), [column])
    return written


def read_notice(session: Session, group: str, column: str) -> notices.NoticeCell | None:
    text = session.read(group, outbox_row(session.region), [column]).text(column)
    return notices.NoticeCell.parse(column, text) if text is not None else None


def deliver_notice(
    ctx: RegionContext, session: Session, cell: notices.NoticeCell, send_nudge: Nudge | None = None
) -> int:
    """A notice into its recipients' rows: those homed in groups replicated here now, each other
    group's part relayed to the outbox of its closest replica. A recipient without an account
    (a mention of nobody) is skipped. Returns the notices written here."""
    if cell.group is not None:
        homes = dict.fromkeys(cell.recipients, cell.group)
    else:
        homes = Social(ctx, session).homes_of(cell.recipients)
    written = 0
    for home, names in by_group(homes):
        if ctx.replicates(home, session.region):
            notices.write(session, home, names, cell.notice)
            written += len(names)
        else:
            part = notices.NoticeCell(cell.notice, tuple(names), home)
            relay_cell(
                ctx, session, home, part.column,
                functools.partial(_outbox_part, part, home), send_nudge,
            )  # fmt: skip
    return written


def read_pending(ctx: RegionContext, session: Session, group: str, column: str) -> Pending | None:
    """The cell, the tweet itself (where it lives here) and the entry's tombstone, in one read:
    the session's label is then past all of them, so whatever it writes next is causally after
    the tweet. A tweet's cell whose entry was deleted since (or a repost undone, or the tweet it
    reposts deleted) comes back as a removal: a fan-out drained late never brings it back."""
    entry_id = column.removesuffix(REMOVAL)
    cell, _, tombs = session.multi_read([
        ReadSpec(group, outbox_row(session.region), (column,)),
        ReadSpec(group, f"tweet:{entry_id}", ("entry",)),
        ReadSpec(ctx.accounts_group, DELETED_ROW, (entry_id,)),
    ])  # fmt: skip
    text = cell.text(column)
    if text is None:
        return None
    pending = Pending.parse(group, column, text)
    if pending.removal:
        return pending
    gone = entry_id in tombs
    if not gone and pending.entry.original_id:
        gone = bool(Social(ctx, session).deleted_among([pending.entry.original_id]))
    return replace(pending, removal=True) if gone else pending


def deliver(ctx: RegionContext, session: Session, pending: Pending, send_nudge: Nudge | None = None) -> int:
    """The fan-out of one pending tweet in ``session`` (at a region replicating its group): the
    followers homed in groups replicated here get it now; each other group's part goes to the
    outbox of its closest replica. Returns the timelines written here."""
    social = Social(ctx, session)
    entry = pending.entry
    if pending.followers is None:  # a post's (or a repost's) own cell: in the poster's home group
        followers = social.all_names(pending.group, f"followers:{entry.poster}")
        if pending.removal:
            social.write_timelines(entry, [], pending.group, remove=True, own_lines_of=entry.poster)
            if not entry.reposted_by:  # a deleted tweet: its reposts go too
                remove_reposts(ctx, session, pending, send_nudge)
        elif not entry.reposted_by:
            social.publish(entry)  # idempotent: a post's batch has it; cells from before posts were atomic
    else:
        followers = dict.fromkeys(pending.followers, pending.group)
    written, relayed = 0, []
    for group, names in by_group(followers):
        if ctx.replicates(group, session.region):
            written += social.write_timelines(entry, names, group, remove=pending.removal)
        else:
            part = Pending(entry, group, tuple(names), removal=pending.removal)
            relayed.append(relay(ctx, session, part, send_nudge))
    log.info("%s %s by %s: %d timelines at %s%s", "removal of" if pending.removal else "tweet",
             entry.id, entry.poster, written, session.region,
             f", relayed to {', '.join(relayed)}" if relayed else "")  # fmt: skip
    return written


def remove_reposts(ctx: RegionContext, session: Session, deleted: Pending, send_nudge: Nudge | None) -> int:
    """A removal cell for each repost of a deleted tweet, in the outbox of (the closest region
    replicating) its reposter's home group: the repost leaves the reposter's lines and their
    followers' timelines as an undone one does. Returns how many."""
    social = Social(ctx, session)
    tweet = deleted.entry
    reposts = social.names(deleted.group, f"reposters:{tweet.id}")  # reposter -> the repost's id
    homes = social.homes_of(list(reposts)) if reposts else {}
    for name, home in homes.items():
        shared = replace(tweet, id=reposts[name], reposted_by=name, original_id=tweet.id)
        relay(ctx, session, Pending(shared, home, removal=True), send_nudge)
    return len(homes)


def by_group(homes: dict[str, str]) -> list[tuple[str, list[str]]]:
    """Users by the group they are homed in (user -> group), groups and users sorted."""
    grouped: dict[str, list[str]] = {}
    for name, group in homes.items():
        grouped.setdefault(group, []).append(name)
    return [(group, sorted(names)) for group, names in sorted(grouped.items())]


def relay(ctx: RegionContext, session: Session, part: Pending, send_nudge: Nudge | None) -> str:
    """Writes ``part`` into the outbox of the closest region replicating its group, from a
    session that migrated there from ``session`` (it waits only for what ``session`` had seen);
    returns that region."""
    return relay_cell(ctx, session, part.group, part.column, part.mutation, send_nudge)


def relay_cell(
    ctx: RegionContext, session: Session, group: str, column: str,
    cell: Callable[[str], Mutation], send_nudge: Nudge | None,
) -> str:  # fmt: skip
    """Writes ``cell(region)`` (an outbox cell of ``group``) at the closest region replicating
    ``group``, from a session that migrated there from ``session``; returns that region."""
    target = ctx.closest_replica(group, near=session.region)
    there = ctx.client.session(target, label=session.token)
    there.batch([cell(target)])
    if send_nudge is not None:
        send_nudge(target, group, column)
    return target


def queued_us(text: str) -> int:
    """When a cell was queued (0 for a cell that cannot be read: tried at once, and its drain
    fails and backs off like any other failure)."""
    try:
        return int(json.loads(text)["q"])
    except (ValueError, KeyError, TypeError):
        return 0


class Sweeper:
    """Drains, every SWEEP_EVERY_S, the cells of this region's outboxes that their nudge left
    (older than GRACE_S), oldest first: the path that makes a lost task cost time, not a tweet.
    A cell that fails (its relay's region unreachable, say) waits, doubling up to BACKOFF_MAX_S,
    while the cells behind it go on."""

    def __init__(self, ctx: RegionContext, send_nudge: Nudge | None = None):
        self.ctx = ctx
        self.send_nudge = send_nudge
        self.groups = sorted(g for g, members in ctx.topology.group_members.items() if ctx.region in members)
        self.stopped = threading.Event()
        self.failing: dict[tuple[str, str], tuple[float, float]] = {}  # cell -> (retry at, back-off)

    def sweep(self, grace_s: float = GRACE_S) -> int:
        """One pass over every outbox here; returns the cells drained."""
        session = self.ctx.client.session(self.ctx.region)
        row = outbox_row(self.ctx.region)
        specs = []  # per group, the oldest tweet cells and the oldest notice cells (sorted after them)
        for group in self.groups:
            specs.append(ReadSpec(group, row, limit=SWEEP_PAGE, reverse=False))
            specs.append(ReadSpec(group, row, limit=SWEEP_PAGE, after=notices.CELL_PREFIX, reverse=False))
        pages = session.multi_read(specs)
        older_than = time.time_ns() // 1000 - int(grace_s * 1e6)
        drained, seen = 0, set()
        for group, page in zip([g for g in self.groups for _ in range(2)], pages, strict=True):
            for cell in page:
                if (group, cell.column) in seen:
                    continue  # in both pages
                seen.add((group, cell.column))
                if queued_us(cell.text) <= older_than:
                    drained += self.try_drain(group, cell.column)
        self.failing = {key: value for key, value in self.failing.items() if key in seen}  # drained elsewhere
        return drained

    def try_drain(self, group: str, column: str) -> int:
        """Drains one cell unless it is backing off; 1 if it was drained."""
        key, now = (group, column), time.monotonic()
        retry_at, backoff = self.failing.get(key, (0.0, 0.0))
        if now < retry_at:
            return 0
        try:
            drain(self.ctx, group, column, self.send_nudge)
        except Exception as exc:  # this cell waits; the others go on
            backoff = min(BACKOFF_MAX_S, max(SWEEP_EVERY_S, 2 * backoff))
            self.failing[key] = (now + backoff, backoff)
            log.warning("sweeper at %s: cell %s (%s) failed: %r; again in %.0f s",
                        self.ctx.region, column, group, exc, backoff)  # fmt: skip
            return 0
        self.failing.pop(key, None)
        return 1

    def run(self) -> None:
        while not self.stopped.wait(SWEEP_EVERY_S):
            try:
                if drained := self.sweep():
                    log.info("sweeper: %d pending fan-outs drained at %s", drained, self.ctx.region)
            except CausalError as exc:  # a region briefly unreachable: the next pass tries again
                log.warning("sweeper at %s: %s; trying again", self.ctx.region, exc)
            except Exception:  # a bug must show in the log, not end the sweeper's thread
                log.exception("sweeper at %s failed; trying again", self.ctx.region)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="outbox-sweeper", daemon=True)
        thread.start()
        return thread


def pending_here(ctx: RegionContext, groups: Iterable[str] | None = None) -> int:
    """Cells waiting in this region's outboxes (a test, the demo's status)."""
    session = ctx.client.session(ctx.region)
    chosen = sorted(groups) if groups is not None else Sweeper(ctx).groups
    rows = session.multi_read([ReadSpec(g, outbox_row(ctx.region), limit=1) for g in chosen])
    return sum(row.size for row in rows)


def _outbox_part(part: notices.NoticeCell, home: str, target: str) -> Mutation:
    """``part``'s cell in ``target``'s outbox row of ``home``."""
    return part.mutation(home, outbox_row(target))
