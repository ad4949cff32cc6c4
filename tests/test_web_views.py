"""The web app's pages and data layer, in-process (pytest-django's client) against a launched
demo-3region cluster with its web tier (the in-process Django serves region virginia; the cluster's
own Celery workers run the fan-out)."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from django.conf import settings as django_settings
from django.test import Client
from helpers.deadlines import scaled
from helpers.pages import (
    PASSWORD,
    articles,
    bodies,
    counts,
    data_layer,
    home_shows,
    html,
    new_user,
    older_link,
    sign_up,
    tweet_refs,
    username,
)
from helpers.waiting import eventually, unique
from helpers.web import django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client import Label
from causal_client.client import Session
from loadtest.check.nemesis import full_store
from webapp.context import current
from webapp.social import Social
from webapp.social_core import PAGE_SIZE
from webapp.social_values import Account, Entry, NoSuchUser, new_tweet_id

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


# -- signed out ------------------------------------------------------------------------------------
def test_signed_out_home_is_the_public_line(client, django_region):  # noqa: F811
    reply = client.get("/")
    assert reply.status_code == 200
    page = html(reply)
    assert "Everyone's tweets" in page
    assert 'aria-label="Public line"' in page
    assert "Your timeline" not in page
    assert 'action="/post/"' not in page  # no post box
    assert 'href="/signup/"' in page and 'href="/login/"' in page


def test_actions_need_a_signed_in_user(client, django_region):  # noqa: F811
    _, other = new_user("tgt")
    # A form post returns, after logging in, to the page the form was on (its POST-only URL
    # would be a 405); without a same-site Referer, to the home page.
    reply = client.post("/post/", {"body": "anonymous tweet"})
    assert reply.status_code == 302
    assert reply["Location"] == "/login/?next=%2F"
    reply = client.post(f"/u/{other}/follow/", HTTP_REFERER=f"http://testserver/u/{other}/")
    assert reply.status_code == 302
    assert reply["Location"] == f"/login/?next=%2Fu%2F{other}%2F"
    reply = client.post(f"/u/{other}/unfollow/", HTTP_REFERER="http://elsewhere.example/x/")
    assert reply["Location"] == "/login/?next=%2F"
    assert counts(html(client.get(f"/u/{other}/")))["followers"] == 0
    assert "anonymous tweet" not in html(client.get("/public/"))


def test_post_only_actions_refuse_get(client, django_region):  # noqa: F811
    sign_up(client, username("get"))
    assert client.get("/logout/").status_code == 405
    assert client.get("/post/").status_code == 405
    assert client.get(f"/u/{username('x')}/follow/").status_code == 405
    assert "Your timeline" in html(client.get("/"))  # GET /logout/ did not sign out


def test_logout(client, django_region):  # noqa: F811
    name = username("out")
    sign_up(client, name)
    assert "Your timeline" in html(client.get("/"))
    reply = client.post("/logout/")
    assert reply.status_code == 302
    assert reply["Location"] == "/public/"
    page = html(client.get("/"))
    assert "Everyone's tweets" in page
    assert f'href="/u/{name}/">@{name}</a>' not in page.split("</nav>")[0]
    assert client.post("/post/", {"body": "after logout"}).status_code == 302  # to the login page


def test_login_after_a_signed_out_follow_lands_on_a_usable_page(client, django_region):  # noqa: F811
    name = username("lnd")
    sign_up(Client(), name)
    _, other = new_user("lnt")
    target = client.post(f"/u/{other}/follow/", HTTP_REFERER=f"http://testserver/u/{other}/")["Location"]
    nxt = unquote(target.split("next=", 1)[1])
    assert nxt == f"/u/{other}/"  # the page the Follow button was on
    reply = client.post("/login/", {"username": name, "password": PASSWORD, "next": nxt}, follow=True)
    assert reply.status_code == 200
    assert reply.redirect_chain[-1][0] == f"/u/{other}/"
    # A next that is no URL at all goes home rather than failing.
    reply = client.post("/login/", {"username": name, "password": PASSWORD, "next": "%2F"})
    assert reply.status_code == 302 and reply["Location"] == "/"


# -- CSRF ------------------------------------------------------------------------------------------
def test_csrf_tokens_are_checked(django_region):  # noqa: F811
    browser = Client(enforce_csrf_checks=True)
    name = username("csrf")
    form = {"username": name, "password": PASSWORD, "password_again": PASSWORD}

    reply = browser.post("/signup/", form)  # no cookie, no token
    assert reply.status_code == 403
    assert "Form expired" in html(reply)
    assert "Reload the page" in html(reply)

    assert browser.get("/signup/").status_code == 200
    token = browser.cookies[django_settings.CSRF_COOKIE_NAME].value
    assert token

    reply = browser.post("/signup/", form)  # the cookie, but no token in the form
    assert reply.status_code == 403
    assert "Form expired" in html(reply)
    reply = browser.post("/signup/", {**form, "csrfmiddlewaretoken": "x" * 32})  # a wrong one
    assert reply.status_code == 403

    reply = browser.post("/signup/", {**form, "csrfmiddlewaretoken": token})
    assert reply.status_code == 302, reply.content[:800]  # and the name was still free
    token = browser.cookies[django_settings.CSRF_COOKIE_NAME].value  # rotated at sign-in

    reply = browser.post("/post/", {"body": "forged"})
    assert reply.status_code == 403
    assert "Form expired" in html(reply)
    reply = browser.post("/post/", {"body": "genuine", "csrfmiddlewaretoken": token})
    assert reply.status_code == 302
    shown = bodies(html(browser.get("/")))
    assert "genuine" in shown
    assert "forged" not in shown

    reply = browser.post("/logout/")
    assert reply.status_code == 403
    reply = browser.post("/logout/", HTTP_X_CSRFTOKEN=token)  # the header works too
    assert reply.status_code == 302


# -- posting ---------------------------------------------------------------------------------------
def test_tweets_are_escaped_everywhere(django_region):  # noqa: F811
    client, name = new_user("esc")
    body = '<script>alert("x")</script> & <b>bold</b> <img src=x onerror=alert(1)>'
    escaped = (
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt; "
        "&lt;img src=x onerror=alert(1)&gt;"
    )
    assert client.post("/post/", {"body": body}).status_code == 302
    home = html(client.get("/"))
    assert escaped in bodies(home)
    (group, tweet_id), *_ = tweet_refs(home)
    replier, _ = new_user("escr")
    assert replier.post("/post/", {"body": "re", "reply_to": f"{group}/{tweet_id}"}).status_code == 302
    pages = {
        "home": home,
        "user": html(client.get(f"/u/{name}/")),
        "tweet": html(client.get(f"/t/{group}/{tweet_id}/")),
        "replier": html(replier.get("/")),  # the original, quoted
    }
    eventually(lambda: escaped in html(client.get("/public/")), what="the escaped tweet on the public line")
    pages["public"] = html(client.get("/public/"))
    for where, page in pages.items():
        assert "<script>alert(" not in page, where
        assert "<b>bold</b>" not in page, where
        assert "<img src=x" not in page, where
    assert f"<q>{escaped[:60]}" in pages["replier"]
    assert f"@{name} " in pages["tweet"]  # the reply box starts with the author's handle


def test_line_breaks_become_br(django_region):  # noqa: F811
    client, _ = new_user("br")
    assert client.post("/post/", {"body": "one\r\ntwo <br>"}).status_code == 302
    assert bodies(html(client.get("/")))[0] == "one<br>two &lt;br&gt;"


def test_overlong_tweet_is_refused_and_nothing_is_stored(django_region):  # noqa: F811
    client, name = new_user("long")
    assert client.post("/post/", {"body": "the only tweet"}).status_code == 302
    reply = client.post("/post/", {"body": "y" * 281})
    assert reply.status_code == 400
    page = html(reply)
    assert "Ensure this value has at most 280 characters (it has 281)." in page
    assert "y" * 281 in page  # the text is kept in the box for editing
    assert "Your timeline" in page
    reply = client.post("/post/", {"body": "   "})
    assert reply.status_code == 400
    assert '<ul class="errors" id="body-errors">' in html(reply)  # (Django's "This field is required.")

    social = data_layer()
    user = social.with_relations(social.account(name))
    assert user.tweets == 1
    assert [e.body for e in social.userline(user).entries] == ["the only tweet"]
    assert [e.body for e in social.timeline(user).entries] == ["the only tweet"]
    user_page = html(client.get(f"/u/{name}/"))
    assert counts(user_page)["tweets"] == 1
    assert "<strong>1</strong> tweet</li>" in user_page  # singular
    assert bodies(user_page) == ["the only tweet"]


def test_replies(django_region):  # noqa: F811
    author, author_name = new_user("op")
    replier, replier_name = new_user("re")
    assert author.post("/post/", {"body": "the original"}).status_code == 302
    group, tweet_id = tweet_refs(html(author.get("/")))[0]

    tweet_page = html(replier.get(f"/t/{group}/{tweet_id}/"))
    assert "the original" in bodies(tweet_page)
    assert f'name="reply_to" value="{group}/{tweet_id}"' in tweet_page
    assert ">Reply</button>" in tweet_page

    reply = replier.post("/post/", {"body": f"@{author_name} indeed", "reply_to": f"{group}/{tweet_id}"})
    assert reply.status_code == 302
    page = html(replier.get("/"))
    assert f"Replied to @{author_name}." in page
    assert f'in reply to <a href="/u/{author_name}/">@{author_name}</a>' in page
    assert "<q>the original</q>" in page
    reply_entry = data_layer().userline(data_layer().account(replier_name)).entries[0]
    assert (reply_entry.reply_to, reply_entry.reply_author, reply_entry.reply_group) == (
        tweet_id,
        author_name,
        group,
    )

    # replies to tweets that do not exist (here), or to no tweet at all
    for ref in (f"{group}/{new_tweet_id()}", f"nogroup/{tweet_id}"):
        reply = replier.post("/post/", {"body": "into the void", "reply_to": ref})
        assert reply.status_code == 400, ref
        assert "The tweet you reply to does not exist (here)." in html(reply)
    reply = replier.post("/post/", {"body": "into the void", "reply_to": "xyz"})
    assert reply.status_code == 400
    assert "Not a tweet reference." in html(reply)
    social = data_layer()
    assert social.with_relations(social.account(replier_name)).tweets == 1
    assert "into the void" not in html(replier.get("/"))


def test_every_reply_listed_has_a_reply_link_and_a_reply_to_oneself_names_nobody(django_region):  # noqa: F811
    """The page's own tweet has the reply form below it, so no Reply link; every reply listed
    under it has one (the link was decided once per page, by whichever tweet was drawn first).
    Replying to one's own tweet starts with nobody's name; replying to another's, with theirs."""
    author, author_name = new_user("root")
    replier, replier_name = new_user("rep")
    assert author.post("/post/", {"body": "a root tweet"}).status_code == 302
    group, tweet_id = tweet_refs(html(author.get("/")))[0]
    for n in range(2):
        answer = {"body": f"answer {n}", "reply_to": f"{group}/{tweet_id}"}
        assert replier.post("/post/", answer).status_code == 302
    own = html(author.get(f"/t/{group}/{tweet_id}/"))
    assert [b for b in bodies(own) if b.startswith("answer")] == ["answer 0", "answer 1"]
    assert own.count('class="reply-link"') == 2
    assert f"@{author_name} </textarea>" not in own
    theirs = html(replier.get(f"/t/{group}/{tweet_id}/"))
    assert theirs.count('class="reply-link"') == 2 and f"@{author_name} </textarea>" in theirs
    # replying to one's own reply names the thread's other participants instead of oneself
    rgroup, rid = tweet_refs(html(author.get(f"/t/{group}/{tweet_id}/")))[1]  # the first answer
    assert author.post("/post/", {"body": "my answer", "reply_to": f"{rgroup}/{rid}"}).status_code == 302
    mine = next(ref for ref in tweet_refs(html(author.get(f"/u/{author_name}/"))) if ref[1] != tweet_id)
    own_reply = html(author.get(f"/t/{mine[0]}/{mine[1]}/"))
    answerer = re.search(r"<textarea[^>]*>\s*@([a-z0-9_]+) ", own_reply)
    assert answerer and answerer.group(1) == replier_name, own_reply[-3000:]


def test_pages_carry_a_content_security_policy_and_no_inline_script(client, django_region):  # noqa: F811
    """Scripts, styles and images from the page's own origin only; nothing inline that such a
    policy would block (the pages would break under it)."""
    browser, me = new_user("csp")
    assert browser.post("/post/", {"body": "<script>alert(1)</script> onclick=x"}).status_code == 302
    for who, path in ((client, "/"), (client, "/login/"), (browser, "/"), (browser, f"/u/{me}/")):
        reply = who.get(path)
        policy = reply["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "object-src 'none'" in policy, policy
        page = html(reply)
        assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", page), path  # every script is a file
        assert not re.search(r"<[a-z][^>]*\s(?:on[a-z]+|style)=", page), path  # no inline handler, style


def test_the_login_page_sends_a_signed_in_user_on(client, django_region):  # noqa: F811
    browser, _ = new_user("in")
    reply = browser.get("/login/")
    assert reply.status_code == 302 and reply["Location"] == "/"
    reply = browser.get("/login/?next=/people/")
    assert reply.status_code == 302 and reply["Location"] == "/people/"
    assert client.get("/login/").status_code == 200  # signed out: the form


def test_a_tweets_page_is_its_conversation(django_region, monkeypatch):  # noqa: F811
    """What it replies to up the chain, the tweet, its replies oldest first (paged), reply counts
    on every tweet; replying lands on the conversation."""
    monkeypatch.setattr("webapp.social.REPLIES_PAGE", 2)
    author, author_name = new_user("cv")
    replier, _ = new_user("cw")
    assert author.post("/post/", {"body": "the start"}).status_code == 302
    group, tweet_id = tweet_refs(html(author.get("/")))[0]
    ref = f"{group}/{tweet_id}"
    for n in range(3):
        reply = replier.post("/post/", {"body": f"reply {n}", "reply_to": ref})
        assert reply.status_code == 302
        assert reply["Location"].startswith(f"/t/{group}/{tweet_id}/#t-")  # back to the conversation
    page = html(replier.get(f"/t/{group}/{tweet_id}/"))
    assert bodies(page) == ["the start", "reply 0", "reply 1"]  # oldest first, two a page
    assert 'title="replies">↩ <span class="count">3</span>' in page
    more = re.search(r'<a rel="next" href="\?after=([0-9a-f]{22})#replies">More replies', page)
    assert more, page[-3000:]
    page = html(replier.get(f"/t/{group}/{tweet_id}/?after={more.group(1)}"))
    assert bodies(page) == ["the start", "reply 2"] and "That is every reply." in page
    assert replier.get(f"/t/{group}/{tweet_id}/?after=nonsense").status_code == 400
    # a reply's page shows what it answers above it, and the line shows the count
    reply_group, reply_id = tweet_refs(html(replier.get("/")))[0]
    page = html(author.get(f"/t/{reply_group}/{reply_id}/"))
    assert bodies(page)[:2] == ["the start", "reply 2"] and "No replies yet." in page
    assert f'<a class="replies" href="/t/{group}/{tweet_id}/#replies"' in html(
        author.get(f"/u/{author_name}/")
    )


def test_the_footer_travels_with_the_session_instead_of_linking_away(client, django_region):  # noqa: F811
    """Signed in, every other region in the footer is a travel form (the session goes along), as
    the header's "Travel to"; signed out, there is nothing to take along: plain links, and no
    "Travel to" in the header."""
    page = html(client.get("/public/"))
    footer = page[page.index("<footer>") :]
    assert 'name="region"' not in page and "other regions:" in footer and 'class="travel"' not in page
    sign_up(client, username("ft"))
    page = html(client.get("/public/"))
    footer = page[page.index("<footer>") :]
    here = django_settings.SATURN_REGION
    others = re.findall(r'<input type="hidden" name="region" value="([a-z0-9_-]+)"><button', footer)
    assert here not in others and len(others) == 2, footer
    assert "http://" not in footer and 'class="travel"' in page
    reply = client.post("/travel/", {"region": others[0]})
    assert reply.status_code == 200 and 'id="handoff"' in html(reply)  # the hand-off page


def test_there_is_a_favicon(client, django_region):  # noqa: F811
    assert 'rel="icon" type="image/svg+xml" href="/static/webapp/favicon.svg"' in html(client.get("/public/"))
    reply = client.get("/favicon.ico")
    assert reply.status_code == 301 and reply["Location"] == "/static/webapp/favicon.svg"


# -- counts, following, fan-out --------------------------------------------------------------------
def test_user_page_counts_tweets(django_region):  # noqa: F811
    client, name = new_user("cnt")
    assert counts(html(client.get(f"/u/{name}/")))["tweets"] == 0
    for i in range(3):
        assert client.post("/post/", {"body": f"number {i}"}).status_code == 302
    page = html(client.get(f"/u/{name}/"))
    assert counts(page)["tweets"] == 3
    assert "<strong>3</strong> tweets</li>" in page and "<strong>0</strong> followers</a>" in page
    assert bodies(page) == ["number 2", "number 1", "number 0"]  # newest first
    assert articles(page) == 3
    assert older_link(page) is None


def test_follow_and_unfollow(django_region):  # noqa: F811
    ann, ann_name = new_user("fa")
    bob, bob_name = new_user("fb")

    page = html(ann.get(f"/u/{bob_name}/"))
    assert f'action="/u/{bob_name}/follow/"' in page
    reply = ann.post(f"/u/{bob_name}/follow/")
    assert reply.status_code == 302
    assert reply["Location"] == f"/u/{bob_name}/"
    page = html(ann.get(f"/u/{bob_name}/"))
    assert f"You follow @{bob_name}" in page
    assert f'action="/u/{bob_name}/unfollow/"' in page
    assert counts(page) == {"tweets": 0, "followers": 1, "following": 0}
    assert counts(html(ann.get(f"/u/{ann_name}/"))) == {"tweets": 0, "followers": 0, "following": 1}
    assert f'href="/u/{ann_name}/">@{ann_name}</a>' in html(ann.get(f"/u/{bob_name}/followers/"))
    assert f'href="/u/{bob_name}/">@{bob_name}</a>' in html(bob.get(f"/u/{ann_name}/following/"))
    assert "Nobody yet." in html(bob.get(f"/u/{bob_name}/following/"))

    assert ann.post(f"/u/{bob_name}/follow/").status_code == 302  # again: no change
    assert counts(html(bob.get(f"/u/{bob_name}/")))["followers"] == 1
    assert counts(html(bob.get(f"/u/{ann_name}/")))["following"] == 1
    assert data_layer().followers(data_layer().account(bob_name)) == {ann_name: "all"}

    reply = ann.post(f"/u/{ann_name}/follow/")
    assert reply.status_code == 400
    assert "You cannot follow yourself." in html(reply)
    assert counts(html(ann.get(f"/u/{ann_name}/")))["followers"] == 0
    assert f'action="/u/{ann_name}/follow/"' not in html(ann.get(f"/u/{ann_name}/"))  # no button
    assert ann.post(f"/u/{username('ghost')}/follow/").status_code == 404

    reply = ann.post(f"/u/{bob_name}/unfollow/")
    assert reply.status_code == 302
    for _ in range(2):  # unfollowing twice: still zero, never negative
        page = html(ann.get(f"/u/{bob_name}/"))
        assert counts(page)["followers"] == 0
        assert f'action="/u/{bob_name}/follow/"' in page
        assert counts(html(ann.get(f"/u/{ann_name}/")))["following"] == 0
        assert ann.post(f"/u/{bob_name}/unfollow/").status_code == 302
    assert "Nobody yet." in html(ann.get(f"/u/{bob_name}/followers/"))


def test_counts_equal_the_lists_under_concurrent_and_cross_region_follows(django_region):  # noqa: F811
    """The replayed report: five parallel follows of one user left its counter at 4 and its list
    at 3. Counts are now the sets' sizes: the same follow five times at once counts once,
    follows from two regions at once count each once, and an unfollow takes exactly one away."""
    from concurrent.futures import ThreadPoolExecutor

    _, star_name = new_user("cnt")
    fans = [new_user("cf")[1] for _ in range(4)]
    ctx = current()

    def follow(fan: str, region: str) -> None:
        social = Social(ctx, ctx.client.session(region))
        social.follow(social.account(fan), social.account(star_name))

    jobs = [(fans[0], "virginia")] * 5 + [(fans[1], "virginia"), (fans[2], "ireland"), (fans[3], "frankfurt")]

    def everyone_at(region: str) -> bool | None:  # the accounts were made at virginia a moment ago
        social = Social(ctx, ctx.client.session(region))
        try:
            return all(social.account(name) for name in (star_name, *fans)) or None
        except NoSuchUser:
            return None

    for region in ("ireland", "frankfurt"):
        eventually(lambda region=region: everyone_at(region), timeout=15, what=f"every account at {region}")
    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(lambda job: follow(*job), jobs))

    def shown() -> tuple[int, int]:
        social = data_layer()
        star = social.with_relations(social.account(star_name))
        return star.followers, len(social.followers(star))

    eventually(lambda: shown() == (4, 4), timeout=15, what="4 followers counted and listed")
    social = data_layer()
    social.unfollow(social.account(fans[0]), social.account(star_name))
    social.unfollow(social.account(fans[0]), social.account(star_name))  # twice: still one less
    assert shown() == (3, 3)
    fan = social.with_relations(social.account(fans[1]))
    assert (fan.followers, fan.following) == (0, 1)


def test_following_brings_their_recent_tweets_home(django_region):  # noqa: F811
    """A follow copies the followed user's latest tweets into the follower's home timeline at
    once (no fan-out involved: they were posted before the follow), newest first, at most
    BACKFILL of them; a home timeline that stayed empty after following reads as broken."""
    from webapp.social_core import BACKFILL

    star, star_name = new_user("bf")
    said = [f"older tweet {i} {unique('t')}" for i in range(BACKFILL + 2)]
    for body in said:
        assert star.post("/post/", {"body": body}).status_code == 302
    fan, _ = new_user("fan")
    assert bodies(html(fan.get("/"))) == []
    assert fan.post(f"/u/{star_name}/follow/").status_code == 302
    home = bodies(html(fan.get("/")))
    assert home[:BACKFILL] == list(reversed(said))[:BACKFILL]
    assert len(home) <= len(said), "a late fan-out of an older tweet may add it: never anything else"


# -- pagination ------------------------------------------------------------------------------------
def post_many(name: str, count: int, prefix: str = "tweet") -> list[Entry]:
    """``count`` tweets by ``name`` through the data layer, oldest first."""
    social = data_layer()
    author = social.account(name)
    return [social.post(author, f"{prefix} {i:02d}") for i in range(count)]


def test_pagination(client, django_region):  # noqa: F811
    name = username("pg")
    sign_up(client, name)
    posted = post_many(name, PAGE_SIZE + 5)
    assert len({e.id for e in posted}) == 45

    first = html(client.get(f"/u/{name}/"))
    assert counts(first)["tweets"] == 45
    assert articles(first) == 40
    assert bodies(first) == [f"tweet {i:02d}" for i in range(44, 4, -1)]
    cursor = older_link(first)
    assert cursor is not None
    assert re.fullmatch(r"[0-9a-f]{22}", cursor)

    second = html(client.get(f"/u/{name}/", {"after": cursor}))
    assert articles(second) == 5
    assert bodies(second) == [f"tweet {i:02d}" for i in range(4, -1, -1)]
    assert older_link(second) is None
    assert '<a rel="first" href="?">← Newest tweets</a>' in second and "That is the end." in second
    assert 'rel="first"' not in first and "That is the end." not in first

    home = html(client.get("/"))  # the home timeline pages the same way
    assert articles(home) == 40
    home_cursor = older_link(home)
    assert home_cursor
    assert bodies(html(client.get("/", {"after": home_cursor}))) == bodies(second)

    for url in (f"/u/{name}/", "/", "/public/"):
        for bad in ("xyz", cursor.upper(), cursor + "0", "<script>"):
            reply = client.get(url, {"after": bad})
            assert reply.status_code == 400, (url, bad)
            assert "not a page cursor" in html(reply)
            assert "<script>" not in html(reply).split("<main ", 1)[1]


def test_no_older_link_when_a_line_fits_one_page(client, django_region):  # noqa: F811
    name = username("pf")
    sign_up(client, name)
    post_many(name, PAGE_SIZE)
    page = html(client.get(f"/u/{name}/"))
    assert articles(page) == PAGE_SIZE
    cursor = older_link(page)
    if cursor is not None:  # it leads nowhere
        assert articles(html(client.get(f"/u/{name}/", {"after": cursor}))) == 0
    assert cursor is None


# -- not found -------------------------------------------------------------------------------------
def test_unknown_pages_are_friendly_404s(client, django_region):  # noqa: F811
    _, name = new_user("nf")
    tweet_id = new_tweet_id()
    urls = [
        f"/u/{username('nobody')}/",
        "/u/Bad-Name!/",
        f"/u/{username('nobody')}/followers/",
        f"/t/all/{tweet_id}/",  # well formed, but no such tweet
        "/t/all/xyz/",
        f"/t/all/{tweet_id.upper()}/",
        f"/t/nogroup/{tweet_id}/",
        "/no/such/page/",
    ]
    for url in urls:
        reply = client.get(url)
        assert reply.status_code == 404, url
        page = html(reply)
        assert "<h1>Not found</h1>" in page, url
        assert "There is nothing here" in page, url
        assert "Traceback" not in page
    assert client.get(f"/u/{name}/").status_code == 200


# -- people ----------------------------------------------------------------------------------------
def test_people_lookup(client, django_region):  # noqa: F811
    _, name = new_user("pp")
    page = html(client.get("/people/"))
    assert f'href="/u/{name}/">@{name}</a>' in page  # among the newest people
    for q in (name, f"@{name}", f"  @{name.upper()} "):
        page = html(client.get("/people/", {"q": q}))
        assert f'Found <a href="/u/{name}/">@{name}</a> · 0 tweets · 0 followers' in page, q
    missing = username("nobody")
    page = html(client.get("/people/", {"q": missing}))
    assert f"No name holds “{missing}”" in page
    assert "Found <a" not in page
    page = html(client.get("/people/", {"q": "<b>no</b>"}))
    assert "No name holds “&lt;b&gt;no&lt;/b&gt;”" in page


def test_people_lookup_with_at_and_a_30_character_name(client, django_region):  # noqa: F811
    name = ("l30_" + username("x"))[:30].ljust(30, "z")
    sign_up(Client(), name)
    assert len(name) == 30
    assert f'Found <a href="/u/{name}/">' in html(client.get("/people/", {"q": name}))  # without '@': found
    page = html(client.get("/people/", {"q": f"@{name}"}))
    assert f'Found <a href="/u/{name}/">@{name}</a>' in page


# -- cost of a timeline page -----------------------------------------------------------------------
def timeline_with_replies(name: str, total: int) -> Account:
    """``total`` entries in ``name``'s timeline, every third one a reply: alternately to another
    user's tweet and to ``name``'s previous one."""
    social = data_layer()
    other_name = username("orig")
    sign_up(Client(), other_name)
    other = social.account(other_name)
    others = [social.post(other, f"elsewhere {i}") for i in range(3)]
    me = social.account(name)
    posted: list[Entry] = []
    for i in range(total):
        if i % 3 == 2:
            original = others[i % len(others)] if (i // 3) % 2 == 0 else posted[i - 1]
            posted.append(social.post(me, f"reply {i:02d}", reply_to=original))
        else:
            posted.append(social.post(me, f"plain {i:02d}"))
    return me


def test_timeline_page_costs_a_bounded_number_of_store_calls(django_region, store_calls):  # noqa: F811
    measured = {}
    for total in (6, PAGE_SIZE + 2):
        client = Client()
        name = username(f"cost{total}")
        sign_up(client, name)
        timeline_with_replies(name, total)
        store_calls.clear()
        reply = client.get("/")
        assert reply.status_code == 200
        page = html(reply)
        assert articles(page) == min(total, PAGE_SIZE)
        assert "in reply to" in page
        assert "<q>elsewhere" in page and "<q>plain" in page  # originals looked up and shown
        assert 'data-anomaly="missing-original"' not in page
        measured[total] = list(store_calls)
    assert len(measured[PAGE_SIZE + 2]) <= 5, measured
    assert measured[PAGE_SIZE + 2] == measured[6], measured  # not one more per entry
    # The label stored by the sign-up request was made here: the page resumes it, no Attach.
    assert measured[6].count("Attach") == 0, measured


def test_tweet_urls_take_any_group_name_a_topology_allows():
    """Placement groups are named like ``fb.virginia.ireland`` (dots): their tweets need URLs."""
    from django.urls import resolve, reverse

    url = reverse("tweet", args=("fb.virginia.ireland", "0" * 22))
    assert url == "/t/fb.virginia.ireland/" + "0" * 22 + "/"
    assert resolve(url).kwargs == {"group": "fb.virginia.ireland", "tweet_id": "0" * 22}


# -- sessions resume here for free; a session that moved away comes back by migration -------------
def test_a_request_after_one_at_the_same_region_does_not_attach(django_region, store_calls):  # noqa: F811
    """Attach (paper Alg. 1) is for a causal past from elsewhere. A session token stored by a
    request that ended at this region covers only what this region showed: the next request
    resumes it without the round trip, even when it came from reading another region's tweet (an
    update label whose stabilization could otherwise wait for every region's heartbeat)."""
    _, poster_name = new_user("far")
    ireland = current().client.session("ireland")

    def account_there() -> Account | None:  # signed up here: in ireland once it has replicated
        try:
            return Social(current(), ireland).account(poster_name)
        except NoSuchUser:
            return None

    me = eventually(account_there, timeout=10, what="the account in ireland")
    body = f"written in ireland {unique('t')}"
    Social(current(), ireland).post(me, body)
    reader = Client()
    sign_up(reader, username("near"))
    eventually(
        lambda: body in html(reader.get(f"/u/{poster_name}/")), timeout=10, what="the ireland tweet here"
    )
    assert reader.session["label"].startswith(f"{current().region}.")  # a token made here
    store_calls.clear()
    assert reader.get("/").status_code == 200
    assert reader.get(f"/u/{poster_name}/").status_code == 200
    assert "Attach" not in store_calls, store_calls


def test_a_session_that_moved_away_stores_a_migration_label_back(django_region, rf):  # noqa: F811
    """A request whose session migrated (data not replicated here) leaves a migration label
    (§4.3) to this region in the cookie, so the next request's attach waits only for that label."""
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    from causal_client import LabelType
    from webapp.causal import LABEL_KEY, CausalRequest

    ctx = current()
    request = rf.get("/")
    request.session = SessionStore()
    causal = CausalRequest(request, ctx)
    causal.session.write("all", unique("row"), {"v": "here"})
    causal.session.migrate("ireland")
    causal.session.write("all", unique("row"), {"v": "there"})
    causal.remember()
    stored = Label.from_token(request.session[LABEL_KEY])  # a bare ticket, not a session token
    assert stored.type == LabelType.MIGRATION and stored.target == ctx.region and stored.region == "ireland"
    again = CausalRequest(request, ctx)
    assert again.session.region == ctx.region  # attached with it (returns once it has arrived)


# -- error pages ------------------------------------------------------------------------------------
def test_a_store_that_does_not_answer_gives_the_503_page(django_region, monkeypatch):  # noqa: F811
    from causal_client import RegionUnavailable

    client, _ = new_user("down")

    def unavailable(self, method, request, *args, **kwargs):
        raise RegionUnavailable("region virginia is unavailable (connection refused)")

    monkeypatch.setattr(Session, "_call", unavailable)
    reply = client.get("/")
    assert reply.status_code == 503
    assert "unavailable" in html(reply) and "Traceback" not in html(reply)
    assert "connection refused" not in html(reply), "the page names no internal detail"


def test_a_full_store_refuses_a_post_with_a_page_that_says_so_and_takes_it_after(django_region, web_cluster):  # noqa: F811
    """The region's store at its memory limit: the post gets a 503 that says the store is full
    and nothing was saved (with Retry-After), reading goes on, and once the store has room the
    same post goes through with nobody doing anything to the store."""
    client, _ = new_user("full")
    body = f"said while full {unique('t')}"
    with full_store(web_cluster.topology, django_region):
        reply = client.post("/post/", {"body": body})
        assert reply.status_code == 503 and reply["Retry-After"] == "30"
        assert "The store is full" in html(reply) and "nothing was saved" in html(reply)
        assert client.get("/public/").status_code == 200
        assert body not in html(client.get("/public/"))
    assert client.post("/post/", {"body": body}).status_code == 302
    assert body in html(client.get("/public/"))


def test_an_unexpected_error_gives_the_500_page(django_region, monkeypatch):  # noqa: F811
    client = Client(raise_request_exception=False)
    monkeypatch.setattr(Social, "public", lambda self, after=None: 1 / 0)
    reply = client.get("/public/")
    assert reply.status_code == 500
    assert "Something went wrong" in html(reply) and "ZeroDivisionError" not in html(reply)


# -- blocking and muting (webapp/blocks.py) ----------------------------------------------------------
def test_a_block_takes_the_follows_away_both_ways_and_neither_sees_the_other(django_region):  # noqa: F811
    ann, ann_name = new_user("bla")
    bob, bob_name = new_user("blb")
    carol, _ = new_user("blc")
    for follower, followed in ((ann, bob_name), (bob, ann_name)):
        assert follower.post(f"/u/{followed}/follow/").status_code == 302
    assert ann.post("/post/", {"body": "ann before the block"}).status_code == 302
    assert bob.post("/post/", {"body": "bob before the block"}).status_code == 302
    home_shows(bob, "ann before the block")
    home_shows(ann, "bob before the block")
    group, tweet_id = tweet_refs(html(ann.get(f"/u/{ann_name}/")))[0]

    reply = ann.post(f"/u/{bob_name}/block/")
    assert reply.status_code == 302 and reply["Location"] == f"/u/{bob_name}/"
    page = html(ann.get(f"/u/{bob_name}/"))
    assert f"You block @{bob_name}" in page and f'action="/u/{bob_name}/unblock/"' in page
    assert "bob before the block" not in page and f'action="/u/{bob_name}/follow/"' not in page
    for name in (ann_name, bob_name):  # no follow left either way
        assert counts(html(carol.get(f"/u/{name}/"))) == {"tweets": 1, "followers": 0, "following": 0}

    # Bob sees none of Ann's tweets: her page, his timeline, the public line, the tweet's page
    page = html(bob.get(f"/u/{ann_name}/"))
    assert f"@{ann_name} blocks you" in page and "ann before the block" not in page
    assert f'action="/u/{ann_name}/follow/"' not in page
    assert "ann before the block" not in bodies(html(bob.get("/")))
    assert "ann before the block" not in bodies(html(bob.get("/public/")))
    assert "bob before the block" not in bodies(html(ann.get("/")))  # nor she his
    reply = bob.get(f"/t/{group}/{tweet_id}/")
    assert reply.status_code == 403 and f"@{ann_name} blocks you" in html(reply)
    assert "ann before the block" in bodies(html(carol.get("/public/")))  # the others still see it

    # ... nor follows, replies to or mentions her; nothing of it is stored
    reply = bob.post(f"/u/{ann_name}/follow/")
    assert reply.status_code == 403 and "one of you blocks the other" in html(reply)
    reply = bob.post("/post/", {"body": "a reply she blocked", "reply_to": f"{group}/{tweet_id}"})
    assert reply.status_code == 400 and "You cannot reply to or mention" in html(reply)
    reply = bob.post("/post/", {"body": f"hey @{ann_name} look"})
    assert reply.status_code == 400 and f"@{ann_name}: one of you blocks the other" in html(reply)
    social = data_layer()
    assert social.with_relations(social.account(bob_name)).tweets == 1
    assert social.following(social.account(bob_name)) == {}
    assert ann.post(f"/u/{ann_name}/block/").status_code == 400  # oneself

    # unblocked: seen again (the follows stay gone, as after Twitter's)
    assert ann.post(f"/u/{bob_name}/unblock/").status_code == 302
    page = html(bob.get(f"/u/{ann_name}/"))
    assert "ann before the block" in bodies(page) and f'action="/u/{ann_name}/follow/"' in page
    assert bob.post("/post/", {"body": f"hello again @{ann_name}"}).status_code == 302


def test_a_mute_hides_someone_from_your_lines_and_notices_and_nobody_is_told(django_region):  # noqa: F811
    ann, ann_name = new_user("mua")
    bob, bob_name = new_user("mub")
    assert ann.post(f"/u/{bob_name}/follow/").status_code == 302
    reply = ann.post(f"/u/{bob_name}/mute/")
    assert reply.status_code == 302 and reply["Location"] == f"/u/{bob_name}/"
    assert bob.post("/post/", {"body": f"muted words for @{ann_name}"}).status_code == 302

    def shown(client: Client, path: str) -> bool:
        return any("muted words" in body for body in bodies(html(client.get(path))))

    assert shown(bob, "/public/")  # he posts and mentions her as before
    page = html(ann.get(f"/u/{bob_name}/"))
    assert f'action="/u/{bob_name}/unmute/"' in page and f'action="/u/{bob_name}/unfollow/"' in page
    assert shown(ann, f"/u/{bob_name}/")  # his own page still shows him, if she goes there
    assert not shown(ann, "/public/")
    # the fan-out brings it into her timeline (the store has it), and her page leaves it out
    tweet_id = data_layer().userline(data_layer().account(bob_name)).entries[0].id
    eventually(
        lambda: tweet_id in data_layer().session.read("all", f"timeline:{ann_name}") or None,
        timeout=30,
        what="the muted tweet in ann's stored timeline",
    )
    assert not shown(ann, "/")
    assert "muted words" not in html(ann.get("/notifications/"))
    assert "mutes you" not in html(bob.get(f"/u/{ann_name}/"))  # nobody is told

    assert ann.post(f"/u/{bob_name}/unmute/").status_code == 302
    assert shown(ann, "/") and shown(ann, "/public/")


def test_a_mention_of_a_name_nobody_has_is_text_not_a_link_to_a_404(django_region):  # noqa: F811
    author, _ = new_user("men")
    _, known = new_user("menk")
    nobody = username("nobody")
    assert author.post("/post/", {"body": f"hi @{known} and @{nobody}"}).status_code == 302
    page = html(author.get("/"))
    assert f'<a class="mention" href="/u/{known}/">@{known}</a>' in page
    assert f'<span class="mention unknown">@{nobody}</span>' in page and f'href="/u/{nobody}/"' not in page


# -- finding: hashtags, search, who to follow (webapp/search.py) ----------------------------------------
def test_a_hashtag_links_to_its_page_newest_first_in_pages_and_a_delete_leaves_it(django_region):  # noqa: F811
    author, _ = new_user("tag")
    tag = "caus" + username("t")[-8:].replace("_", "x")
    for n in range(PAGE_SIZE + 1):
        assert author.post("/post/", {"body": f"number {n} of #{tag.upper()}"}).status_code == 302
    assert author.post("/post/", {"body": f"no tag, only the word {tag}"}).status_code == 302
    home = html(author.get("/"))
    assert f'<a class="tag" href="/tag/{tag}/">#{tag.upper()}</a>' in home
    assert author.get(f"/tag/{tag.upper()}/")["Location"] == f"/tag/{tag}/"
    page = html(author.get(f"/tag/{tag}/"))
    shown = bodies(page)
    assert len(shown) == PAGE_SIZE and shown[0].startswith(f"number {PAGE_SIZE} of")  # newest first
    older = html(author.get(f"/tag/{tag}/?after={older_link(page)}"))
    assert [b.split(" of ")[0] for b in bodies(older)] == ["number 0"]
    newest = tweet_refs(page)[0]
    assert author.post(f"/t/{newest[0]}/{newest[1]}/delete/", {"next": "/"}).status_code == 302
    assert not bodies(html(author.get(f"/tag/{tag}/")))[0].startswith(f"number {PAGE_SIZE} of")
    assert author.get("/tag/%21%21/").status_code == 404


def test_search_finds_tweets_with_all_their_words_and_people_by_any_part_of_a_name(django_region):  # noqa: F811
    poster, poster_name = new_user("srchpost")
    reader, reader_name = new_user("srchread")
    word = username("w")[-10:].replace("_", "q")
    assert poster.post("/post/", {"body": f"Saturn serializers carry {word} labels"}).status_code == 302
    assert poster.post("/post/", {"body": f"GentleRain waits for {word} heartbeats"}).status_code == 302
    found = html(reader.get("/search/", {"q": f"SERIALIZERS {word}"}))
    assert [b for b in bodies(found)] == [f"Saturn serializers carry {word} labels"]
    assert len(bodies(html(reader.get("/search/", {"q": word})))) == 2
    assert bodies(html(reader.get("/search/", {"q": f"{word} venus"}))) == []
    # people by part of the name, any case, each with a Follow button
    part = poster_name[4:12].upper()
    people = html(reader.get("/search/", {"q": part}))
    assert (
        f'href="/u/{poster_name}/">@{poster_name}</a>' in people
        and f'action="/u/{poster_name}/follow/"' in people
    )
    listed = html(reader.get("/people/", {"q": poster_name[:-3]}))
    assert f'href="/u/{poster_name}/"' in listed
    # what a reader must not see is not found either: a deleted tweet, a blocker's tweets
    group, tweet_id = tweet_refs(html(poster.get("/")))[0]
    assert poster.post(f"/t/{group}/{tweet_id}/delete/", {"next": "/"}).status_code == 302
    assert bodies(html(reader.get("/search/", {"q": word}))) == [f"Saturn serializers carry {word} labels"]
    assert poster.post(f"/u/{reader_name}/block/").status_code == 302
    assert bodies(html(reader.get("/search/", {"q": word}))) == []
    too_long = reader.get("/search/", {"q": "x" * 101})
    assert too_long.status_code == 400 and "at most 100 characters" in html(too_long)
    assert "Type a word, a #tag or part of a name" in html(reader.get("/search/", {"q": "  "}))


def test_who_to_follow_suggests_the_people_your_follows_follow_with_one_click(django_region):  # noqa: F811
    ann, ann_name = new_user("wtfa")
    _, bob_name = new_user("wtfb")
    carol, carol_name = new_user("wtfc")
    empty_home = html(ann.get("/"))
    assert "Who to follow" in empty_home  # a new user's empty home suggests people
    assert carol.post(f"/u/{bob_name}/follow/").status_code == 302
    assert ann.post(f"/u/{carol_name}/follow/").status_code == 302
    page = html(ann.get("/people/"))
    suggested = page.split("Who to follow")[1].split("Newest people")[0]
    assert f'href="/u/{bob_name}/"' in suggested and f"@{ann_name}<" not in suggested
    assert f'href="/u/{carol_name}/"' not in suggested  # followed already
    reply = ann.post(f"/u/{bob_name}/follow/", {"next": "/people/"})
    assert reply.status_code == 302 and reply["Location"] == "/people/"
    after = html(ann.get("/people/"))
    assert f'href="/u/{bob_name}/"' not in after.split("Who to follow")[-1].split("Newest people")[0]


# -- a profile of one's own (webapp/profiles.py) ---------------------------------------------------------
def png(width: int, height: int, colour: str = "teal") -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def upload(name: str, content: bytes, kind: str = "image/png"):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, content, content_type=kind)


def test_a_profile_of_ones_own_with_a_picture_that_every_region_serves(django_region, web_cluster):  # noqa: F811
    import io
    import urllib.request

    from PIL import Image

    me, name = new_user("prof")
    settings_page = html(me.get("/settings/"))
    assert "at least 8 characters" in settings_page  # the password rules, up front
    assert "at least 8 characters" in html(Client().get("/signup/"))
    fields = {"display": "Ann <b>Lee</b>", "bio": "first line\r\nsecond <i>line</i>"}
    reply = me.post("/settings/profile/", {**fields, "avatar": upload("me.png", png(300, 200))})
    assert reply.status_code == 302 and reply["Location"] == f"/u/{name}/"
    page = html(me.get(f"/u/{name}/"))
    assert '<span class="display-name">Ann &lt;b&gt;Lee&lt;/b&gt;</span>' in page
    assert "first line<br>second &lt;i&gt;line&lt;/i&gt;" in page
    picture = re.search(rf'src="(/avatar/{name}/\d+\.webp)"', page)
    assert picture, page[:3000]
    served = me.get(picture.group(1))
    assert served.status_code == 200 and served["Content-Type"] == "image/webp"
    assert "immutable" in served["Cache-Control"]
    with Image.open(io.BytesIO(served.content)) as image:
        assert image.format == "WEBP" and image.size == (128, 128)
    # its tweets show the name and the picture; another region serves the same picture
    assert me.post("/post/", {"body": "with a face"}).status_code == 302
    line = html(me.get("/"))
    assert 'Ann &lt;b&gt;Lee&lt;/b&gt;</span> <a class="author"' in line and picture.group(1) in line
    elsewhere = web_cluster.topology.web_url("ireland") + picture.group(1)

    def served_there() -> bytes | None:
        try:
            with urllib.request.urlopen(elsewhere, timeout=scaled(5)) as there:
                return there.read()
        except OSError:
            return None

    assert eventually(served_there, timeout=20, what="the picture served at ireland") == served.content
    # what is refused, and nothing changes
    for bad, why in (
        ({"avatar": upload("x.png", b"not a picture")}, "not a picture this site can read"),
        ({"avatar": upload("big.png", b"0" * (2 << 20) + b"1")}, "larger than 2 MB"),
        ({"display": "bell\x07"}, "control characters"),
        ({"bio": "b" * 161}, "at most 160"),
    ):
        reply = me.post("/settings/profile/", {**fields, **bad})
        assert reply.status_code == 400 and why in html(reply), (bad.keys(), html(reply)[:200])
    assert picture.group(1) in html(me.get(f"/u/{name}/"))
    assert me.post("/settings/profile/", {**fields, "remove_avatar": "on"}).status_code == 302
    assert f'src="/avatar/{name}.svg"' in html(me.get(f"/u/{name}/"))
    assert me.get(picture.group(1)).status_code == 404


def test_a_new_password_signs_out_every_other_browser(django_region):  # noqa: F811
    here, name = new_user("pwc")
    there = Client()
    assert there.post("/login/", {"username": name, "password": PASSWORD}).status_code == 302
    new = "another-pass-9"
    wrong = here.post(
        "/settings/password/", {"current": "nope-nope-1", "password": new, "password_again": new}
    )
    assert wrong.status_code == 400 and "not your current password" in html(wrong)
    weak = here.post(
        "/settings/password/", {"current": PASSWORD, "password": "12345678", "password_again": "12345678"}
    )
    assert weak.status_code == 400
    reply = here.post("/settings/password/", {"current": PASSWORD, "password": new, "password_again": new})
    assert reply.status_code == 302
    assert "Your timeline" in html(here.get("/"))  # this browser stays signed in
    assert "Your timeline" not in html(there.get("/"))  # the other one is signed out
    assert Client().post("/login/", {"username": name, "password": PASSWORD}).status_code == 400
    assert Client().post("/login/", {"username": name, "password": new}).status_code == 302


def test_deleting_an_account_takes_everything_of_it_away_and_keeps_the_name(django_region):  # noqa: F811
    leaver, name = new_user("leave")
    fan, fan_name = new_user("leavef")
    assert fan.post(f"/u/{name}/follow/").status_code == 302
    assert leaver.post(f"/u/{fan_name}/follow/").status_code == 302
    assert leaver.post("/post/", {"body": "soon gone"}).status_code == 302
    home_shows(fan, "soon gone")
    wrong = leaver.post("/settings/delete/", {"confirm": "someone", "password": PASSWORD})
    assert wrong.status_code == 400 and "not your username" in html(wrong)
    reply = leaver.post("/settings/delete/", {"confirm": f"@{name}", "password": PASSWORD})
    assert reply.status_code == 302
    assert "Your timeline" not in html(leaver.get("/"))  # signed out
    assert fan.get(f"/u/{name}/").status_code == 410
    assert "soon gone" not in bodies(html(fan.get("/"))) and "soon gone" not in bodies(
        html(fan.get("/public/"))
    )
    assert counts(html(fan.get(f"/u/{fan_name}/"))) == {"tweets": 0, "followers": 0, "following": 0}
    assert Client().post("/login/", {"username": name, "password": PASSWORD}).status_code == 400
    again = Client().post("/signup/", {"username": name, "password": PASSWORD, "password_again": PASSWORD})
    assert again.status_code == 400 and "taken" in html(again)
    people = html(fan.get("/people/"))
    at = people.find(f'href="/u/{name}/"')
    assert at < 0, people[max(0, at - 600) : at + 100]


def test_unfollowing_takes_their_tweets_out_of_your_home_timeline(django_region):  # noqa: F811
    ann, _ = new_user("unfa")
    bob, bob_name = new_user("unfb")
    assert ann.post(f"/u/{bob_name}/follow/").status_code == 302
    assert bob.post("/post/", {"body": "while followed"}).status_code == 302
    home_shows(ann, "while followed")
    assert ann.post("/post/", {"body": "my own stays"}).status_code == 302
    assert ann.post(f"/u/{bob_name}/unfollow/").status_code == 302
    shown = bodies(html(ann.get("/")))
    assert "while followed" not in shown and "my own stays" in shown
    assert ann.post(f"/u/{bob_name}/follow/").status_code == 302
    assert "while followed" in bodies(html(ann.get("/")))
