"""Fan-out of a tweet to followers' timelines, in Celery tasks (one Redis broker per region).

Every task carries the poster's causal label: its session attaches with it, so each timeline
write is causally after the tweet (whoever sees the timeline entry can see the tweet, and what
the poster had seen before posting). Under partial replication a follower's timeline lives in
the follower's home group, which this region may not replicate: that part goes, with the label,
as a task to the broker of the closest region that does.
"""

from __future__ import annotations

import logging

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from causal_client import Session
from causal_client.errors import retryable_errors
from webapp.region import current
from webapp.social import Entry, Social

log = logging.getLogger("webapp.fanout")

app = Celery("webapp")  # its broker: set by webapp/worker.py (workers); senders name one (send())
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    task_acks_late=True,  # a worker that dies mid-task leaves it to another: writes are idempotent
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
)


class QueueUnavailable(RuntimeError):
    """A region's broker cannot take a task (it is down or unreachable)."""


# One try to reach a broker, with short timeouts: a broker that is down must not hold up the
# request that queues (the caller falls back to doing the work inline). Kombu's default retries
# made every post wait 6 s while a broker was down.
SEND_OPTIONS = {
    "max_retries": 0,
    "interval_start": 0,
    "interval_step": 0.1,
    "interval_max": 0.1,
    "socket_connect_timeout": 1.0,
    "socket_timeout": 2.0,
}


def send(task, region: str, *args: object) -> None:
    """Queues ``task`` at ``region``'s broker; raises QueueUnavailable if it cannot (at once)."""
    url = current().topology.broker_url(region)
    try:
        with app.connection_for_write(url, transport_options=SEND_OPTIONS) as connection:
            task.apply_async(args=args, connection=connection, retry=False)
    except (OperationalError, RedisError, OSError) as exc:
        raise QueueUnavailable(f"the task queue of {region} is unavailable: {exc}") from exc


def queue_fan_out(entry: Entry, session: Session) -> str:
    """Queues the fan-out of a tweet just posted by ``session``, at the region where the tweet
    was written (the session's: its worker finds the tweet and its label there at once). If that
    broker is down, the fan-out runs here and now, slower but never lost. Returns where it ran."""
    try:
        send(fan_out, session.region, entry.to_json(), entry.id, session.token)
        return f"queued at {session.region}"
    except QueueUnavailable as exc:
        log.warning("%s; fanning out tweet %s inline", exc, entry.id)
        fan_out_with(session, entry)
        return "inline"


# Store errors a retry can help (a region briefly unreachable, a deadline: ``retryable``) and
# broker errors are retried with backoff; a bad request is not. The writes are idempotent (the
# same cell set again), so a retry after a partial fan-out is safe.
RETRY = {
    "autoretry_for": (*retryable_errors(), QueueUnavailable),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 8,
}


@app.task(name="webapp.fan_out", **RETRY)
def fan_out(entry_json: str, tweet_id: str, label_token: str) -> int:
    """Reads the author's followers and writes the tweet into their timelines, group by group.
    ``label_token`` is the poster's session token, made at this region (queue_fan_out)."""
    ctx = current()
    session = ctx.client.session(ctx.region, label=label_token)  # the poster's token: free here
    return fan_out_with(session, Entry.from_json(tweet_id, entry_json))


def fan_out_with(session: Session, entry: Entry) -> int:
    """The fan-out itself, in ``session``: every follower's timeline in groups replicated where
    the session is, and for each other group a task at the closest region replicating it, which
    attaches with a migration label (it waits only for what the author had seen to get there).
    If that region's broker is down, the session writes those timelines itself (it migrates)."""
    ctx = current()
    social = Social(ctx, session)
    followers = social.all_names(entry.group, f"followers:{entry.author}")
    by_group: dict[str, list[str]] = {}
    for name, group in followers.items():
        by_group.setdefault(group, []).append(name)
    written, relayed = 0, 0
    for group, names in by_group.items():
        if ctx.replicates(group, session.region):
            written += social.write_timelines(entry, names, group)
            continue
        target = ctx.closest_replica(group, near=session.region)
        migration = session.prepare_migration(target)
        try:
            send(fan_out_group, target, entry.to_json(), entry.id, group, names, migration.to_token())
            relayed += 1
        except QueueUnavailable as exc:
            log.warning("%s; writing group %s's timelines from %s", exc, group, session.region)
            written += Social(ctx, session).write_timelines(entry, names, group)
    log.info("tweet %s by %s: %d timelines at %s, %d groups relayed", entry.id, entry.author,
             written, session.region, relayed)  # fmt: skip
    return written


@app.task(name="webapp.fan_out_group", **RETRY)
def fan_out_group(entry_json: str, tweet_id: str, group: str, names: list[str], label_token: str) -> int:
    """One group's part of a fan-out, at a region that replicates the group; ``label_token`` is
    a migration label to here (§4.3)."""
    ctx = current()
    session = ctx.client.session(ctx.region, label=label_token)
    return Social(ctx, session).write_timelines(Entry.from_json(tweet_id, entry_json), names, group)
