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


def send(task, region: str, *args: object) -> None:
    """Queues ``task`` at ``region``'s broker (this region's: the usual case)."""
    with app.connection_for_write(current().topology.broker_url(region)) as connection:
        task.apply_async(args=args, connection=connection)


@app.task(name="webapp.fan_out", bind=True, max_retries=5, default_retry_delay=1.0)
def fan_out(self, entry_json: str, tweet_id: str, label_token: str) -> int:
    """Reads the author's followers and writes the tweet into their timelines, group by group."""
    ctx = current()
    entry = Entry.from_json(tweet_id, entry_json)
    session = ctx.client.session(ctx.region, label=label_token)  # waits until the tweet is here
    social = Social(ctx, session)
    followers = social.names(entry.group, f"followers:{entry.author}")
    by_group: dict[str, list[str]] = {}
    for name, group in followers.items():
        by_group.setdefault(group, []).append(name)
    written = 0
    for group, names in by_group.items():
        target = ctx.closest_replica(group)
        if target == session.region or ctx.replicates(group, session.region):
            written += social.write_timelines(entry, names, group)
        else:
            send(fan_out_group, target, entry_json, tweet_id, group, names, session.token)
    log.info("tweet %s by %s: %d timelines here, %d groups elsewhere", tweet_id, entry.author,
             written, len(by_group) - (1 if written else 0))  # fmt: skip
    return written


@app.task(name="webapp.fan_out_group", bind=True, max_retries=5, default_retry_delay=1.0)
def fan_out_group(
    self, entry_json: str, tweet_id: str, group: str, names: list[str], label_token: str
) -> int:
    """One group's part of a fan-out, at a region that replicates the group."""
    ctx = current()
    session = ctx.client.session(ctx.region, label=label_token)
    return Social(ctx, session).write_timelines(Entry.from_json(tweet_id, entry_json), names, group)
