"""Notifications (each kind, the unread count, written by the outbox), deletes with tombstones,
undone reposts and the live "N new tweets" endpoint, through the views, in-process against a
launched demo-3region (its Celery workers and sweepers drain the outbox)."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from helpers.pages import (
    bodies,
    counts,
    data_layer,
    first_tweet_path,
    home_shows,
    html,
    new_user,
    repost_scene,
)
from helpers.waiting import eventually
from helpers.web import django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client import ReadSpec
from webapp import notices
from webapp.context import current
from webapp.fanout import pending_here
from webapp.social_values import Entry, outbox_row

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def notice_kinds(page: str) -> list[str]:
    return re.findall(r'<article class="notice notice-\w+[^"]*" data-kind="(\w+)"', page)


def unread(page: str) -> int:
    found = re.search(r'<span class="unread-count" data-unread="(\d+)"', page)
    assert found, "a signed-in page shows the unread count"
    return int(found.group(1))


def wait_for_kinds(client: Client, wanted: list[str], timeout: float = 30) -> str:
    def arrived() -> str | None:
        reply = client.get("/live/?line=notices&since=")
        return (reply.status_code == 200 and json.loads(reply.content)["unread"] >= len(wanted)) or None

    eventually(
        arrived, timeout=timeout, interval=0.3, what=f"{len(wanted)} unread notices ({', '.join(wanted)})"
    )
    return html(client.get("/notifications/"))


# -- notifications ---------------------------------------------------------------------------------
def test_every_kind_of_notice_arrives_once_and_is_counted_until_seen(django_region):  # noqa: F811
    me, my_name = new_user("ntf")
    fan, fan_name = new_user("nfan")
    assert me.post("/post/", {"body": "notice me"}).status_code == 302
    path = first_tweet_path(html(me.get("/")))
    assert unread(html(me.get("/"))) == 0
    assert fan.post(f"/u/{my_name}/follow/").status_code == 302
    for _ in range(2):  # a double click notifies once
        assert fan.post(path + "like/", {"next": path}).status_code == 302
    assert fan.post(path + "repost/", {"next": path}).status_code == 302
    ref = path.split("/t/")[1].rstrip("/")
    assert fan.post("/post/", {"body": f"@{my_name} a reply", "reply_to": ref}).status_code == 302
    assert fan.post("/post/", {"body": f"hello @{my_name} and @nobody_here_at_all"}).status_code == 302

    page = wait_for_kinds(me, ["follow", "like", "repost", "reply", "mention"])
    assert notice_kinds(page) == ["mention", "reply", "repost", "like", "follow"], "newest first"
    assert page.count(f'href="/u/{fan_name}/">@{fan_name}</a>') == 5
    assert "a reply" in page and "liked your tweet" in page and "followed you" in page
    assert page.count('class="notice notice-') == page.count(" unread") == 5, "all new on this visit"
    assert unread(html(me.get("/"))) == 0, "seen once the page was shown"
    again = html(me.get("/notifications/"))
    assert " unread" not in again and len(notice_kinds(again)) == 5
    assert notice_kinds(html(fan.get("/notifications/"))) == [], "nobody notifies themselves"


def test_a_users_actions_on_their_own_tweets_notify_nobody(django_region):  # noqa: F811
    """Liking, reposting, replying to and mentioning oneself: no notice (``Social.notice``'s guard
    and ``notices.for_tweet``'s). Another user's like afterwards is the only one that arrives, so
    the outbox did run meanwhile and the silence is not a stalled worker's."""
    me, my_name = new_user("nself")
    assert me.post("/post/", {"body": "my own"}).status_code == 302
    path = first_tweet_path(html(me.get("/")))
    ref = path.split("/t/")[1].rstrip("/")
    assert me.post(path + "like/", {"next": path}).status_code == 302
    assert me.post(path + "repost/", {"next": path}).status_code == 302
    assert me.post("/post/", {"body": f"@{my_name} replying to myself", "reply_to": ref}).status_code == 302
    assert me.post("/post/", {"body": f"talking to @{my_name}"}).status_code == 302
    fan, fan_name = new_user("nselff")
    assert fan.post(path + "like/", {"next": path}).status_code == 302
    page = wait_for_kinds(me, ["like"])
    assert notice_kinds(page) == ["like"] and f"@{fan_name}" in page
    # Anything of one's own would be an outbox cell written before the fan's like: once this
    # region's outboxes are empty, every such cell has been delivered (a drain deletes its cell
    # after delivering it).
    eventually(
        lambda: pending_here(current()) == 0, timeout=10, interval=0.2, what="the outboxes here drained"
    )
    assert notice_kinds(html(me.get("/notifications/"))) == ["like"]


def test_an_undone_like_or_repost_takes_its_notice_back_and_a_like_again_notifies_once(django_region):  # noqa: F811
    """Like, unlike, like again: one like notice, not two. A repost undone: its notice goes
    (it was listed once the repost was made). Both read the tweet's likers and reposters rows
    when the page is drawn (``notices.withdrawn``)."""
    me, _ = new_user("nund")
    fan, fan_name = new_user("nundf")
    assert me.post("/post/", {"body": "undo me"}).status_code == 302
    path = first_tweet_path(html(me.get("/")))
    assert fan.post(path + "like/", {"next": path}).status_code == 302
    assert fan.post(path + "repost/", {"next": path}).status_code == 302
    assert notice_kinds(wait_for_kinds(me, ["like", "repost"])) == ["repost", "like"]
    assert fan.post(path + "unlike/", {"next": path}).status_code == 302
    assert fan.post(path + "unrepost/", {"next": path}).status_code == 302
    assert notice_kinds(html(me.get("/notifications/"))) == [], "both undone: neither is told any more"
    assert fan.post(path + "like/", {"next": path}).status_code == 302
    page = wait_for_kinds(me, ["like"])
    assert notice_kinds(page) == ["like"] and page.count(f"@{fan_name}") == 1, "liked again: told once"


def test_a_notice_waits_in_the_outbox_until_a_worker_or_the_sweeper_delivers_it(django_region):  # noqa: F811
    """A like written by the data layer alone (no request, so no task queued): the cell it left in
    the outbox is the notice's only record, and the region's sweeper delivers it."""
    me, my_name = new_user("nsw")
    assert me.post("/post/", {"body": "swept"}).status_code == 302
    social = data_layer()
    owner = social.account(my_name)
    _, liker_name = new_user("nswl")
    liker = social.account(liker_name)
    entry = social.userline(owner).entries[0]
    assert social.like(liker, entry)
    assert social.queued, "the like's notice is an outbox cell"
    region, group, column = social.queued[0]
    assert social.session.read(group, outbox_row(region), [column]).text(column) is not None
    page = wait_for_kinds(me, ["like"])
    assert notice_kinds(page) == ["like"] and f"@{liker_name}" in page


def test_notification_pages_refuse_bad_input(django_region):  # noqa: F811
    me, _ = new_user("nbad")
    assert me.get("/notifications/?after=zzz").status_code == 400
    assert Client().get("/notifications/").status_code == 302, "signed out: to the login page"
    assert me.post("/notifications/").status_code == 405


def test_notices_serialise_and_parse_back():
    made = notices.Notice("0" * 22, "reply", "ann", "1" * 22, "g", "x" * 300)
    back = notices.Notice.from_json(made.id, made.to_json())
    assert back.kind == "reply" and back.actor == "ann" and len(back.body) == 140
    cell = notices.NoticeCell(made, ("bob", "cy"), "g")
    parsed = notices.NoticeCell.parse(cell.column, cell.mutation("g", "o").ops[0][2].decode())
    assert parsed.recipients == ("bob", "cy") and parsed.group == "g" and parsed.notice.id == made.id
    assert notices.mentioned("@Ann @bob @ann x@carl @bob", besides=("bob",)) == ("ann",)


# -- deletes ---------------------------------------------------------------------------------------
def test_a_deleted_tweet_leaves_every_line_thread_and_count(django_region):  # noqa: F811
    author, author_name = new_user("del")
    follower, _ = new_user("delf")
    replier, _ = new_user("delr")
    assert follower.post(f"/u/{author_name}/follow/").status_code == 302
    assert author.post("/post/", {"body": "soon gone"}).status_code == 302
    path = first_tweet_path(html(author.get("/")))
    ref = path.split("/t/")[1].rstrip("/")
    home_shows(follower, "soon gone")
    assert replier.post("/post/", {"body": "a reply that stays", "reply_to": ref}).status_code == 302
    parent = html(author.get(path))
    assert "a reply that stays" in parent and 'class="delete link"' in parent
    assert 'class="delete link"' not in html(follower.get(path)), "only the author is offered Delete"
    assert follower.post(path + "delete/", {"next": "/"}).status_code == 403

    reply = author.post(path + "delete/", {"next": path}, follow=True)
    assert reply.status_code == 200 and "Deleted." in html(reply)
    assert reply.redirect_chain[-1][0] == "/", "its own page is gone: back home"
    assert "soon gone" not in bodies(html(author.get("/")))
    assert counts(html(author.get(f"/u/{author_name}/")))["tweets"] == 0
    assert "soon gone" not in bodies(html(Client().get("/public/")))
    gone = author.get(path)
    assert gone.status_code == 410 and "deleted" in html(gone)
    home_shows(follower, "soon gone", present=False)
    replier_page = html(replier.get("/"))
    assert "a reply that stays" in bodies(replier_page) and "(a deleted tweet)" in replier_page
    assert 'data-anomaly="missing-original"' not in replier_page, "deleted is not missing"
    assert author.post(path + "delete/", {"next": "/"}).status_code == 404, "twice: nothing left"
    assert author.post("/t/nosuchgroup/0000000000000000abcdef/delete/").status_code == 404
    assert author.get(path + "delete/").status_code == 405


def test_a_late_write_never_brings_a_deleted_tweet_back(django_region):  # noqa: F811
    """A fan-out drained after the delete (or an old write replicated again) puts the entry back
    into a timeline: the tombstone still hides it."""
    author, author_name = new_user("res")
    reader, reader_name = new_user("resr")
    assert author.post("/post/", {"body": "stay dead"}).status_code == 302
    social = data_layer()
    owner, follower = social.account(author_name), social.account(reader_name)
    entry = social.userline(owner).entries[0]
    assert author.post(first_tweet_path(html(author.get("/"))) + "delete/").status_code == 302
    social.write_timelines(entry, [reader_name], follower.home_group)  # the late write
    social.session.write(owner.home_group, f"userline:{author_name}", {entry.id: entry.to_json()})
    assert entry.id in social.deleted_among([entry.id])
    assert "stay dead" not in bodies(html(reader.get("/")))
    assert "stay dead" not in bodies(html(reader.get(f"/u/{author_name}/")))
    assert social.tweet(entry.group, entry.id) is None


# -- reposts undone --------------------------------------------------------------------------------
def test_a_repost_can_be_undone_and_made_again(django_region):  # noqa: F811
    scene = repost_scene("urp", "share then regret")
    author, reposter, reposter_name, path = scene.author, scene.reposter, scene.reposter_name, scene.path

    def followers_home_shows(expected: bool):
        home_shows(scene.follower, "share then regret", present=expected)

    assert reposter.post(path + "repost/", {"next": "/"}).status_code == 302
    followers_home_shows(True)
    mine = html(reposter.get(path))
    assert 'class="repost on" aria-pressed="true" title="Undo repost"' in mine and "unrepost/" in mine
    undone = reposter.post(path + "unrepost/", {"next": "/"}, follow=True)
    assert "Repost undone" in html(undone)
    assert "share then regret" not in bodies(html(reposter.get(f"/u/{reposter_name}/")))
    assert re.search(r'class="repost"[^>]*>⟲ <span class="count">0</span>', html(author.get(path)))
    followers_home_shows(False)
    assert "You had not reposted that." in html(reposter.post(path + "unrepost/", {"next": "/"}, follow=True))
    assert reposter.post(path + "repost/", {"next": "/"}).status_code == 302, "again, with a new id"
    followers_home_shows(True)


# -- live pages ------------------------------------------------------------------------------------
def test_the_live_endpoint_counts_what_arrived_since_the_page(django_region):  # noqa: F811
    me, _ = new_user("live")
    other, other_name = new_user("liveo")
    assert me.post(f"/u/{other_name}/follow/").status_code == 302
    page = html(me.get("/"))
    assert 'data-live="home"' in page
    since = re.search(r'data-live="home" data-since="([0-9a-f]*)"', page).group(1)
    assert json.loads(me.get(f"/live/?line=home&since={since}").content)["new"] == 0
    for i in range(2):
        assert other.post("/post/", {"body": f"live {i}"}).status_code == 302

    def two_new() -> bool | None:
        return json.loads(me.get(f"/live/?line=home&since={since}").content)["new"] == 2 or None

    eventually(two_new, timeout=30, interval=0.3, what="2 new tweets on the live home line")
    path = first_tweet_path(html(other.get("/")))
    group, tweet_id = path.split("/")[2:4]
    thread = html(me.get(path))
    assert f'data-live="replies/{group}/{tweet_id}" data-since=""' in thread
    assert me.post("/post/", {"body": "a live reply", "reply_to": f"{group}/{tweet_id}"}).status_code == 302
    found = json.loads(Client().get(f"/live/?line=replies/{group}/{tweet_id}&since=").content)
    assert found == {"new": 1, "unread": None}
    assert json.loads(Client().get(f"/live/?line=user/{other_name}&since=").content)["new"] == 2
    assert json.loads(Client().get("/live/?line=public&since=").content)["new"] >= 3
    assert Client().get("/live/?line=home&since=").status_code == 403, "whose home?"
    for bad in ("line=nope", "line=home&since=xyz", "line=user/A%20B", f"line=replies/nogroup/{tweet_id}"):
        assert me.get(f"/live/?{bad}").status_code == 400, bad
    assert me.get("/live/?line=user/nobody_at_all_here").status_code == 404
    assert me.post("/live/?line=home").status_code == 405


def test_an_entry_round_trips():
    made = Entry("0" * 22, "a", "b", "g", reposted_by="r", original_id="1" * 22)
    assert Entry.from_json(made.id, made.to_json()) == made


def test_a_fan_out_drained_after_the_delete_removes_instead(django_region):  # noqa: F811
    """The post's outbox cell is still there when the tweet is deleted (no worker got to it):
    draining it then takes the tweet out of the lines instead of putting it back."""
    from webapp import fanout

    author, author_name = new_user("late")
    _, reader_name = new_user("later")
    social = data_layer()
    owner, reader = social.account(author_name), social.account(reader_name)
    social.follow(reader, owner)
    entry = social.post(owner, "never fanned out")  # the data layer alone: no task queued
    social.delete(owner, entry)
    fanout.drain(current(), owner.home_group, entry.id)  # the cell, if the sweeper left it
    rows = social.session.multi_read([
        ReadSpec(social.accounts, "public", (entry.id,)),
        ReadSpec(reader.home_group, f"timeline:{reader_name}", (entry.id,)),
        ReadSpec(owner.home_group, f"userline:{author_name}", (entry.id,)),
    ])  # fmt: skip
    assert all(entry.id not in row for row in rows), "the late fan-out wrote the deleted tweet"
    assert "never fanned out" not in bodies(html(author.get("/public/")))


def test_deleting_a_tweet_takes_its_reposts_away(django_region):  # noqa: F811
    scene = repost_scene("drp", "reposted then deleted")
    author, reposter, reposter_name, follower, path = (
        scene.author, scene.reposter, scene.reposter_name, scene.follower, scene.path
    )  # fmt: skip
    assert reposter.post(path + "repost/", {"next": "/"}).status_code == 302
    home_shows(follower, "reposted then deleted")
    assert author.post(path + "delete/").status_code == 302
    assert "reposted then deleted" not in bodies(html(follower.get("/"))), "hidden at once (tombstone)"
    social = data_layer()
    me = social.account(reposter_name)

    def reposter_lines_empty() -> bool | None:
        rows = social.session.multi_read(social.relation_specs(me)[:1])
        return rows[0].size == 0 or None

    eventually(
        reposter_lines_empty, timeout=30, interval=0.3, what="the repost gone from the reposter's userline"
    )
    assert counts(html(reposter.get(f"/u/{reposter_name}/")))["tweets"] == 0


def test_a_live_poll_never_rewrites_the_session_cookie(django_region):  # noqa: F811
    """A poll answered after a sign-out must not put the signed-in cookie back."""
    from django.conf import settings

    me, _ = new_user("pollc")
    other, _ = new_user("pollo")
    assert other.post("/post/", {"body": "news this poll reads"}).status_code == 302
    reply = me.get("/live/?line=public&since=")  # its read moves the session's label on
    assert reply.status_code == 200 and json.loads(reply.content)["new"] >= 1
    assert settings.SESSION_COOKIE_NAME not in reply.cookies
