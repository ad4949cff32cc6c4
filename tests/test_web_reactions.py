"""What a Twitter or Mastodon user expects: likes, reposts, mentions and links, relative times,
avatars; and the live causality page's event stream (in-process against a launched demo-3region)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from helpers.pages import bodies, counts, first_tweet_path, html, new_user, repost_scene
from helpers.waiting import eventually
from helpers.web import django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client.errors import Conflict, OutcomeUnknown
from webapp.context import current
from webapp.social_values import entries_of

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


# -- likes, reposts, avatars, times, mentions and links ------------------------------------------------
def test_likes_count_each_user_once_and_can_be_undone(django_region):  # noqa: F811
    author, _author_name = new_user("liked")
    fans = [new_user("liker") for _ in range(3)]
    assert author.post("/post/", {"body": "like me"}).status_code == 302
    path = first_tweet_path(html(author.get("/")))
    for fan, _ in fans:
        for _ in range(2):  # a double click counts once
            assert fan.post(path + "like/", {"next": path}).status_code == 302
    assert fans[2][0].post(path + "unlike/", {"next": path}).status_code == 302
    page = html(author.get(path))
    assert re.search(r'class="like"[^>]*>♥ <span class="count">2</span>', page), page[:3000]
    mine = html(fans[0][0].get(path))
    assert 'class="like on" aria-pressed="true"' in mine and "unlike/" in mine
    assert 'class="like" aria-pressed="false"' in html(fans[2][0].get(path))
    assert Client().post(path + "like/").status_code == 302, "signed out: to the login page"
    assert author.post("/t/all/0000000000000000abcdef/like/").status_code == 404
    assert author.get(path + "like/").status_code == 405


def test_a_repost_reaches_the_reposters_followers_once(django_region):  # noqa: F811
    scene = repost_scene("orig", "worth sharing")
    author, author_name, reposter, reposter_name = (
        scene.author,
        scene.author_name,
        scene.reposter,
        scene.reposter_name,
    )
    follower, path = scene.follower, scene.path
    assert reposter.post(path + "repost/", {"next": "/"}).status_code == 302
    again = reposter.post(path + "repost/", {"next": "/"}, follow=True)
    assert "You reposted that already." in html(again)

    def follower_has_it() -> str | None:
        page = html(follower.get("/"))
        return page if "worth sharing" in bodies(page) else None

    page = eventually(follower_has_it, timeout=20, interval=0.2)
    assert bodies(page).count("worth sharing") == 1
    assert f'<a href="/u/{reposter_name}/">@{reposter_name}</a> reposted' in page
    assert f'href="/u/{author_name}/">@{author_name}</a>' in page, "shown as the author's tweet"
    assert re.search(r'class="repost"[^>]*>⟲ <span class="count">1</span>', html(author.get(path)))
    counts_page = html(reposter.get(f"/u/{reposter_name}/"))
    assert counts(counts_page)["tweets"] == 1 and "worth sharing" in bodies(counts_page)


def test_a_tweet_reposted_by_several_people_one_follows_shows_once(django_region):  # noqa: F811
    """One entry per tweet in a timeline, however many of the people one follows reposted it
    ("@b and @c reposted"), and one's own tweet reposted by oneself does not double."""
    author, author_name = new_user("many")
    first, first_name = new_user("rpa")
    second, second_name = new_user("rpb")
    reader, _ = new_user("rdr")
    for name in (author_name, first_name, second_name):
        assert reader.post(f"/u/{name}/follow/").status_code == 302
    assert author.post("/post/", {"body": "shared twice"}).status_code == 302
    path = first_tweet_path(html(author.get("/")))
    for who in (first, second, author):  # the author reposts their own tweet too
        assert who.post(path + "repost/", {"next": "/"}).status_code == 302

    def all_arrived() -> str | None:
        page = html(reader.get("/"))
        return page if re.search(r"reposted</p>", page) and page.count(" others reposted") == 1 else None

    page = eventually(all_arrived, timeout=30, interval=0.3)
    assert bodies(page).count("shared twice") == 1, bodies(page)
    assert re.search(
        r'<p class="reposted">⟲ <a href="/u/[a-z0-9_]+/">@[a-z0-9_]+</a> and 2 others reposted</p>', page
    )
    own = html(author.get("/"))
    assert bodies(own).count("shared twice") == 1, bodies(own)


def test_the_home_pages_store_calls_do_not_grow_with_the_reposters(django_region, store_calls):  # noqa: F811
    """A tweet reposted by one or by three of the people one follows: the home page makes the
    same store calls (its timeline is one read, the reactions one more, whoever reposted)."""
    author, _ = new_user("calls")
    reposters = [new_user(f"rc{i}") for i in range(3)]
    reader, _ = new_user("crd")
    for _, name in reposters:
        assert reader.post(f"/u/{name}/follow/").status_code == 302
    assert author.post("/post/", {"body": "counted calls"}).status_code == 302
    path = first_tweet_path(html(author.get("/")))

    def calls_for_home(reposted_by: str) -> int:
        def shown() -> str | None:
            page = html(reader.get("/"))
            return page if reposted_by in page else None

        page = eventually(shown, timeout=30, interval=0.3)
        assert bodies(page).count("counted calls") == 1
        store_calls.clear()
        reader.get("/")
        return len(store_calls)

    reposters[0][0].post(path + "repost/", {"next": "/"})
    one = calls_for_home("reposted</p>")
    for client, _ in reposters[1:]:
        client.post(path + "repost/", {"next": "/"})
    three = calls_for_home(" and 2 others reposted</p>")
    assert three == one, (one, three)


def test_mentions_and_links_are_links_and_nothing_else_is_markup(django_region):  # noqa: F811
    client, _name = new_user("links")
    _, known = new_user("links_m")
    typed = known.capitalize()
    body = f'hi @{typed} see https://example.com/a?b=1&c=2. <b>x</b> javascript:alert(1) "@x'
    assert client.post("/post/", {"body": body}).status_code == 302
    shown = bodies(html(client.get("/")))[0]
    assert f'<a class="mention" href="/u/{known}/">@{typed}</a>' in shown
    assert '<a href="https://example.com/a?b=1&amp;c=2" rel="nofollow ugc noopener noreferrer"' in shown
    assert "&lt;b&gt;x&lt;/b&gt;" in shown and "<b>" not in shown
    assert 'href="javascript' not in shown


def test_times_are_relative_with_the_exact_time_on_hover(django_region):  # noqa: F811
    from webapp.formatting import relative

    client, _ = new_user("times")
    assert client.post("/post/", {"body": "what time is it"}).status_code == 302
    found = re.search(r'<time datetime="([^"]+)" title="([^"]+ UTC)">([^<]+)</time>', html(client.get("/")))
    assert found and found.group(3) in ("now", "5s", "6s", "7s", "8s", "9s"), found
    now = 1_800_000_000.0
    assert [relative(int((now - ago) * 1e6), now) for ago in (2, 42, 300, 7200, 3 * 86400)] == [
        "now", "42s", "5m", "2h", "3d",
    ]  # fmt: skip
    assert relative(int((now - 30 * 86400) * 1e6), now) == "Dec 16"


def test_avatars_are_generated_here_and_differ_by_name(django_region):  # noqa: F811
    first, second = Client().get("/avatar/alice.svg"), Client().get("/avatar/bob.svg")
    assert first.status_code == 200 and first["Content-Type"] == "image/svg+xml"
    assert "max-age=86400" in first["Cache-Control"]
    assert first.content.startswith(b"<svg") and first.content != second.content
    assert Client().get("/avatar/alice.svg").content == first.content
    assert Client().get("/avatar/No%20Such.svg").status_code == 404


def test_the_causality_events_stream_frames_of_every_pair(django_region):  # noqa: F811
    import json

    reply = Client().get("/causality/events")
    assert reply.status_code == 200 and reply["Content-Type"] == "text/event-stream"
    stream = iter(reply.streaming_content)
    assert next(stream).decode().startswith("retry: ")
    event = next(stream).decode()
    assert event.startswith("event: frame\ndata: ")
    frame = json.loads(event.split("data: ", 1)[1])
    regions = current().topology.region_names
    assert set(frame["regions"]) == set(regions) and all(r["up"] for r in frame["regions"].values())
    reply.close()
    page = html(Client().get("/causality/"))
    assert 'id="tree-layout"' in page and "/static/webapp/causality.js" in page


def test_the_live_view_takes_a_few_threads_at_most_and_gives_them_back(django_region):  # noqa: F811
    """Streams beyond STREAMS_PER_PROCESS get a 503 with Retry-After (the page tries again later)
    instead of every thread of the web app; a stream closed before its first frame gives its
    slot back."""
    from webapp.views import causality

    opened = [Client().get("/causality/events") for _ in range(causality.STREAMS_PER_PROCESS)]
    assert all(reply.status_code == 200 for reply in opened)
    full = Client().get("/causality/events")
    assert full.status_code == 503 and full["Retry-After"] == str(causality.RETRY_WHEN_FULL_S)
    opened[0].close()  # never iterated: the browser left at once
    again = Client().get("/causality/events")
    assert again.status_code == 200
    for reply in [*opened[1:], again]:
        reply.close()


@pytest.mark.parametrize("commit", ["landed", "lost"])
def test_a_repost_whose_claim_was_cut_short_is_settled_not_refused(django_region, monkeypatch, commit):  # noqa: F811
    """The repost register's insert-if-absent is cut short (its reply lost: ``OutcomeUnknown``,
    which racing tabs on a loaded machine get when a concurrent claim overtakes a commit that
    reached one region), once, after its commit took effect or before. The repost is settled by
    sending the claim again, not refused with a 503 for a repost that may have happened: one
    repost, under the id the register holds."""
    from helpers.pages import data_layer

    from causal_client.client import Session
    from webapp.social_core import REPOSTS

    _, author_name = new_user("cutorig")
    _, reposter_name = new_user("cutshort")
    social = data_layer()
    original = social.post(social.account(author_name), "claimed, then the reply was lost")
    reposter = social.account(reposter_name)
    real_execute, cut = Session.execute, []

    def cut_short_once(self, namespace, key, command):
        if namespace == REPOSTS and not cut:
            cut.append(key)
            if commit == "landed":
                real_execute(self, namespace, key, command)
            raise OutcomeUnknown(f"register {namespace}/{key}: the reply was lost (injected)")
        return real_execute(self, namespace, key, command)

    monkeypatch.setattr(Session, "execute", cut_short_once)
    shared = social.repost(reposter, original)
    assert cut and shared is not None
    raw = entries_of(social.session.slice(reposter.home_group, f"userline:{reposter_name}", limit=100))
    assert [e.id for e in raw if e.original_id == original.id] == [shared.id]
    assert social.session.strong_read(REPOSTS, cut[0]).value == shared.id


def test_reposts_from_tabs_racing_give_one_repost(django_region):  # noqa: F811
    """Five tabs of one user repost the same tweet at the same moment: the repost's id is
    claimed once, so the userline holds one repost of it (a check-then-write would give several)."""
    import threading

    from helpers.pages import data_layer

    _, author_name = new_user("racedorig")
    _, reposter_name = new_user("racer")
    social = data_layer()
    original = social.post(social.account(author_name), "shared by many tabs")
    reposter = social.account(reposter_name)
    start = threading.Barrier(5)
    results = []
    refused: list[Conflict] = []  # a tab whose claim lost to the others every time (a loaded machine)

    def tab() -> None:
        mine = data_layer()
        start.wait()
        try:
            results.append(mine.repost(reposter, original))
        except Conflict as exc:  # typed and retryable: it did not take effect
            refused.append(exc)

    threads = [threading.Thread(target=tab) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    account = social.account(reposter_name)  # the row itself: pages show a tweet once anyway
    raw = entries_of(social.session.slice(account.home_group, f"userline:{reposter_name}", limit=100))
    userline = [e for e in raw if e.original_id == original.id]
    assert len(userline) == 1, userline
    assert {r.id for r in results if r is not None} == {userline[0].id}
    assert len(results) + len(refused) == 5 and all(exc.retryable for exc in refused)
