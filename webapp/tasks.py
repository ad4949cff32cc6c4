"""Celery's side of the fan-out: a task that drains one outbox cell (webapp/fanout.py), queued at
the region's broker right after a post (a nudge), and the queueing itself, with one short try.

The broker holds no work that matters: the pending fan-out is an outbox cell in the causal store,
written with the tweet, and each region's sweeper drains what a nudge did not (the broker was
down, the worker died mid-task). Tasks are retried on store errors that a retry can help.
"""

from __future__ import annotations

import logging

from celery import Celery
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from causal_client import tls
from causal_client.errors import retryable_errors
from webapp import fanout
from webapp.context import current

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
    # Under the deployment's TLS the brokers' URLs are rediss:// (without these, kombu would not
    # check the broker's certificate at all).
    broker_use_ssl=tls.redis_options(for_url=True) or None,
)


class QueueUnavailable(RuntimeError):
    """A region's broker cannot take a task (it is down or unreachable)."""


# One try to reach a broker, with short timeouts: a broker that is down must not hold up the
# request that queues (the region's sweeper does the work a little later). Kombu's default
# retries made every post wait 6 s while a broker was down.
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


def nudge(region: str, group: str, tweet_id: str) -> None:
    """Asks ``region``'s worker to drain an outbox cell now. A broker that is down costs one short
    try and a log line: the sweeper there drains the cell within a few seconds anyway."""
    try:
        send(drain_outbox, region, group, tweet_id)
    except QueueUnavailable as exc:
        log.warning("%s; its sweeper will fan out tweet %s", exc, tweet_id)


# Store errors a retry can help (a region briefly unreachable, a deadline: ``retryable``) are
# retried with backoff; a bad request is not. Draining is idempotent, so a retry is safe.
RETRY = {
    "autoretry_for": retryable_errors(),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 8,
}


@app.task(name="webapp.drain_outbox", **RETRY)
def drain_outbox(group: str, tweet_id: str) -> int:
    """Drains this region's outbox cell ``tweet_id`` in ``group`` (a no-op if already done)."""
    return fanout.drain(current(), group, tweet_id, send_nudge=nudge)
