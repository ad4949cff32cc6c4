"""Fan-out through the outbox: every follower, exactly once, never lost when the queue is down
(in-process views against a launched demo-3region; the cluster's Celery workers drain)."""

from __future__ import annotations

import pytest
from django.test import Client
from helpers.pages import (
    bodies,
    data_layer,
    html,
    new_user,
    sign_up,
    username,
)
from helpers.waiting import eventually, unique
from helpers.web import django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from webapp.context import current
from webapp.social import Social
from webapp.social_values import Account

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_fan_out_reaches_followers_timelines(django_region):  # noqa: F811
    fan, _ = new_user("fan")
    bystander, _ = new_user("by")
    star, star_name = new_user("star")
    assert fan.post(f"/u/{star_name}/follow/").status_code == 302
    body = f"news from {star_name}"
    assert star.post("/post/", {"body": body}).status_code == 302
    assert body in bodies(html(star.get("/")))  # the poster's own timeline: at once

    def fan_sees_it() -> str | None:
        page = html(fan.get("/"))
        return page if body in bodies(page) else None

    page = eventually(fan_sees_it, timeout=15, interval=0.1, what="the tweet on the fan's timeline")
    assert f'href="/u/{star_name}/">@{star_name}</a>' in page
    assert body not in bodies(html(bystander.get("/")))  # the one fan-out task has run: not here


# -- fan-out: every follower, and never lost when the queue is down ----------------------------------
def test_all_names_pages_through_a_long_row(django_region):  # noqa: F811
    social = data_layer()
    row = unique("followers:long")
    names = {f"f{i:03d}": "all" for i in range(7)}
    for name, group in names.items():
        social.session.write("all", row, {name: group})
    assert social.all_names("all", row, page_size=3) == names
    assert social.names("all", row, limit=3) == dict(list(names.items())[:3])


def test_posting_with_the_queue_down_leaves_the_fan_out_to_the_sweeper(django_region, monkeypatch):  # noqa: F811
    """The broker cannot take the nudge: the post still succeeds, its fan-out waits in the
    outbox (in the store, written with the tweet), and the region's sweeper (a thread of the
    cluster's Celery worker) delivers it and empties the outbox."""
    from services.topology import Topology
    from webapp.fanout import pending_here

    author, author_name = new_user("qdown")
    follower, _ = new_user("qfan")
    assert follower.post(f"/u/{author_name}/follow/").status_code == 302
    monkeypatch.setattr(Topology, "broker_url", lambda self, region: "redis://127.0.0.1:9/0")
    body = f"queue is down {unique('b')}"
    reply = author.post("/post/", {"body": body, "reply_to": ""})
    assert reply.status_code == 302, html(reply)[:800]
    monkeypatch.undo()
    eventually(
        lambda: body in bodies(html(follower.get("/"))),
        timeout=20,
        interval=0.2,
        what="the swept tweet at the follower",
    )
    eventually(
        lambda: pending_here(current()) == 0, timeout=10, interval=0.2, what="the outboxes here drained"
    )


def star_and_fan(prefix: str) -> tuple[Social, Account, Account]:
    """Two new accounts, the second following the first (through the data layer)."""
    social = data_layer()
    star_name, fan_name = username(prefix), username(f"{prefix}fan")
    sign_up(Client(), star_name)
    sign_up(Client(), fan_name)
    star, fan = social.account(star_name), social.account(fan_name)
    social.follow(fan, star)
    return social, star, fan


def test_a_post_whose_process_died_before_queueing_still_reaches_followers(django_region):  # noqa: F811
    """The data layer's post alone, as when the web process dies right after it: no task was
    ever queued, and the follower still gets the tweet (the sweeper finds its outbox cell)."""
    social, star, fan = star_and_fan("died")
    entry = social.post(star, "posted, then the process died")
    eventually(
        lambda: entry.id in [e.id for e in social.timeline(fan).entries],
        timeout=20,
        interval=0.2,
        what="the swept tweet on the fan's timeline",
    )
    assert entry.id in [e.id for e in social.public().entries]


def test_a_drained_cell_is_not_delivered_twice(django_region):  # noqa: F811
    """Draining is idempotent: a second drain of the same tweet (a nudge after the sweeper, a
    retry after a crash) finds nothing and writes nothing; a cell put back is delivered to the
    same timeline cell, so the follower still has the tweet once."""
    from webapp.fanout import drain
    from webapp.social_values import Pending

    social, star, fan = star_and_fan("once")
    entry = social.post(star, "exactly once")
    drain(current(), entry.group, entry.id)
    assert drain(current(), entry.group, entry.id) == 0
    social.session.batch([Pending(entry, entry.group).mutation(current().region)])  # as after a crash
    assert drain(current(), entry.group, entry.id) == 1
    timeline = [e.id for e in social.timeline(fan).entries]
    assert timeline.count(entry.id) == 1


def test_a_broker_that_is_down_costs_a_post_one_try(django_region, monkeypatch):  # noqa: F811
    """A broker that closes every connection: queueing gives up after one (kombu's defaults tried
    three times, six seconds, on every post), and the caller goes on (the sweeper fans out)."""
    import socket
    import threading

    from services.topology import Topology
    from webapp import tasks

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []

    def refuse() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            connection.close()

    threading.Thread(target=refuse, daemon=True).start()
    port = listener.getsockname()[1]
    monkeypatch.setattr(Topology, "broker_url", lambda self, region: f"redis://127.0.0.1:{port}/0")
    try:
        with pytest.raises(tasks.QueueUnavailable):
            tasks.send(tasks.drain_outbox, current().region, "all", "x")
    finally:
        listener.close()
    assert len(accepted) == 1


def test_seed_demo_fills_the_region_and_fans_out_in_process(django_region):  # noqa: F811
    """`manage.py seed_demo`: demo users who follow each other and tweets, each delivered to the
    followers' timelines by the command itself (its outbox cells drained there)."""
    from io import StringIO

    from django.core.management import call_command

    from webapp.fanout import pending_here

    out = StringIO()
    call_command("seed_demo", "--users", "3", "--tweets", "1", stdout=out)
    assert "seeded 3 users and 3 tweets" in out.getvalue() or "is taken" in out.getvalue()
    social = data_layer()
    alice = social.with_relations(social.account("alice"))
    assert alice.tweets >= 1 and alice.following >= 1
    own = {e.author for e in social.timeline(alice).entries}
    assert own - {"alice"}, "tweets of the people alice follows are on her timeline"
    assert pending_here(current()) == 0 or eventually(
        lambda: pending_here(current()) == 0, timeout=10, what="the outboxes here drained"
    )
