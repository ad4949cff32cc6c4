"""The web app's views, forms and data layer, in-process (pytest-django's client) against a launched
demo-3region cluster with its web tier (the in-process Django serves region virginia; the cluster's
own Celery workers run the fan-out)."""

from __future__ import annotations

import logging
import re
import sys
from html import unescape
from http.cookies import SimpleCookie
from urllib.parse import unquote

import pytest
from django.conf import settings as django_settings
from django.test import Client
from helpers.waiting import eventually, unique
from helpers.web import django_region, web_cluster  # noqa: F401  (fixtures)

from causal_client import Label
from causal_client.client import Session
from webapp import settings as app_settings
from webapp import throttle
from webapp.context import current
from webapp.forms import FindForm, PostForm, SignupForm, valid_cursor
from webapp.social import MAX_TWEET_CHARS, PAGE_SIZE, Account, Entry, Social, new_tweet_id
from webapp.views.errors import OneLineClientErrors

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

PASSWORD = "pw-123456"
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# -- helpers ---------------------------------------------------------------------------------------
def username(prefix: str = "u") -> str:
    """A fresh valid username (unique within the module's cluster)."""
    name = re.sub(r"[^a-z0-9_]", "_", unique(prefix).lower())[-30:]
    assert re.fullmatch(r"[a-z0-9_]{2,30}", name)
    return name


def sign_up(client: Client, name: str, password: str = PASSWORD) -> None:
    reply = client.post("/signup/", {"username": name, "password": password, "password_again": password})
    assert reply.status_code == 302, reply.content[:800]
    assert reply["Location"] == "/"


def new_user(prefix: str = "u") -> tuple[Client, str]:
    """A new client, signed up and signed in as a new user."""
    client = Client()
    name = username(prefix)
    sign_up(client, name)
    return client, name


def html(reply) -> str:
    return reply.content.decode()


def bodies(page: str) -> list[str]:
    """The tweet bodies a page shows, in order (as rendered: escaped)."""
    return re.findall(r'<p class="body">(.*?)</p>', page, flags=re.S)


def articles(page: str) -> int:
    return page.count('<article class="tweet"')


def counts(page: str) -> dict[str, int]:
    """A user page's tweets / followers / following numbers."""
    found = {
        what: re.search(rf"<strong>(\d+)</strong> {word}", page)
        for what, word in (("tweets", "tweets?"), ("followers", "followers?"), ("following", "following"))
    }
    assert all(found.values()), page[:2000]
    return {what: int(m.group(1)) for what, m in found.items()}


def older_link(page: str) -> str | None:
    """The cursor of the "Older tweets" link, if the page has one."""
    m = re.search(r'<a rel="next" href="\?after=([^"]*)">Older tweets', page)
    return m.group(1) if m else None


def tweet_refs(page: str) -> list[tuple[str, str]]:
    """(group, tweet id) of each tweet's permalink on a page, in order."""
    return re.findall(r'<a class="time" href="/t/([a-z0-9_-]+)/([0-9a-f]{22})/">', page)


def data_layer() -> Social:
    """The app's data layer on a fresh session at the region Django serves."""
    ctx = current()
    return Social(ctx, ctx.client.session(ctx.region))


@pytest.fixture(autouse=True)
def fast_hashes(settings):
    """A cheap password hasher (PBKDF2 costs ~0.5 s a hash on a busy 2-core box); the login test
    switches back to the app's own hashers."""
    settings.PASSWORD_HASHERS = FAST_HASHERS


# -- forms (pure) ----------------------------------------------------------------------------------
def signup_form(name: str, password: str = PASSWORD, again: str | None = None) -> SignupForm:
    return SignupForm({"username": name, "password": password, "password_again": again or password})


def test_signup_form_lowercases_and_strips_the_username():
    form = signup_form("  Alice_Smith9 ")
    assert form.is_valid(), form.errors
    assert form.cleaned_data["username"] == "alice_smith9"


@pytest.mark.parametrize("name", ["ab", "a" * 30, "A_1", "_x_", "007"])
def test_signup_form_accepts_valid_usernames(name):
    form = signup_form(name)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["username"] == name.lower()


@pytest.mark.parametrize(
    "name",
    [
        *("a", "A", "a" * 31, "al ice", "al-ice", "al.ice", "élan", "a!b", "<b>x</b>", "bob\x00", "@bob", ""),
        *("__", "___"),  # underscores alone
    ],
)
def test_signup_form_rejects_bad_usernames(name):
    form = signup_form(name)
    assert not form.is_valid()
    assert "username" in form.errors
    assert "password" not in form.errors


def test_signup_form_passwords():
    mismatch = signup_form("carol", "pw-123456", "pw-654321")
    assert not mismatch.is_valid()
    assert mismatch.errors["password_again"] == ["The two passwords differ."]

    short = signup_form("carol", "1234567")  # 7 characters
    assert not short.is_valid()
    assert "password" in short.errors
    assert "at least 8" in short.errors["password"][0]

    exactly = signup_form("carol", "horse-12")  # 8 characters
    assert exactly.is_valid(), exactly.errors

    for weak, why in [
        ("password", "too common"),
        ("12345678", "entirely numeric"),
        (" " * 8, "more than blanks"),
        ("carol123", "too similar"),
    ]:
        form = signup_form("carol", weak)
        assert not form.is_valid(), weak
        assert any(why in e for e in form.errors["password"]), (weak, form.errors)

    spaced = signup_form("carol", " pw 1234 ")  # passwords are taken as typed, spaces included
    assert spaced.is_valid(), spaced.errors
    assert spaced.cleaned_data["password"] == " pw 1234 "

    too_long = signup_form("carol", "x" * 129)
    assert not too_long.is_valid()
    assert "password" in too_long.errors


@pytest.mark.parametrize("body", ["", " ", "   \n\t  ", "\r\n"])
def test_post_form_rejects_empty_and_blank_bodies(body):
    form = PostForm({"body": body})
    assert not form.is_valid()
    assert "body" in form.errors


def test_post_form_length_limit():
    assert MAX_TWEET_CHARS == 280
    ok = PostForm({"body": "x" * 280})
    assert ok.is_valid(), ok.errors
    assert ok.cleaned_data["body"] == "x" * 280
    emoji = PostForm({"body": "🐦" * 280})  # characters, not bytes
    assert emoji.is_valid(), emoji.errors
    too_long = PostForm({"body": "x" * 281})
    assert not too_long.is_valid()
    assert "at most 280 characters (it has 281)" in too_long.errors["body"][0]
    padded = PostForm({"body": "  " + "x" * 280 + "\n"})  # surrounding blanks are not counted
    assert padded.is_valid(), padded.errors
    assert padded.cleaned_data["body"] == "x" * 280


def test_post_form_counts_a_submitted_line_break_as_one_character():
    form = PostForm({"body": "a" * 139 + "\r\n" + "b" * 140})  # 280 characters as the browser counts
    assert form.is_valid(), form.errors


@pytest.mark.parametrize(
    "ref",
    [
        "",
        "all/0123456789abcdef012345",
        "my-group_2/" + "f" * 22,
        "fb.virginia.ireland/" + "0" * 22,
        "EU/" + "a" * 22,
    ],
)
def test_post_form_accepts_tweet_references(ref):
    form = PostForm({"body": "hi", "reply_to": ref})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["reply_to"] == ref


@pytest.mark.parametrize(
    "ref",
    [
        "xyz",
        "all",
        "all/",
        "/0123456789abcdef012345",
        "all/0123456789abcdef01234",  # 21 hex digits
        "all/0123456789abcdef0123456",  # 23
        "all/0123456789ABCDEF012345",  # upper-case hex
        ".all/0123456789abcdef012345",  # group names start with a letter or digit
        "al l/0123456789abcdef012345",
        "a/b/0123456789abcdef012345",
        "all/0123456789abcdef01234g",
        "g" * 65 + "/0123456789abcdef012345",
    ],
)
def test_post_form_rejects_malformed_tweet_references(ref):
    form = PostForm({"body": "hi", "reply_to": ref})
    assert not form.is_valid()
    assert form.errors["reply_to"] == ["Not a tweet reference."]


@pytest.mark.parametrize(
    ("q", "expected"),
    [("Alice", "alice"), ("@bob_2", "bob_2"), ("  @Carol  ", "carol"), ("", ""), ("@", "")],
)
def test_find_form_normalises_the_query(q, expected):
    form = FindForm({"q": q})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["q"] == expected


def test_find_form_limits_the_query_length():
    assert not FindForm({"q": "x" * 31}).is_valid()


def test_valid_cursor():
    tweet_id = new_tweet_id()
    assert valid_cursor(tweet_id) == tweet_id
    assert valid_cursor(None) is None
    assert valid_cursor("") is None
    for bad in ["xyz", tweet_id[:-1], tweet_id + "0", tweet_id.upper(), "g" * 22, "../" + tweet_id[3:]]:
        with pytest.raises(ValueError, match="not a page cursor"):
            valid_cursor(bad)


def test_entry_json_round_trip():
    plain = Entry(new_tweet_id(), "ann", 'say "<hi>" & bye', "all")
    assert Entry.from_json(plain.id, plain.to_json()) == plain
    reply = Entry(new_tweet_id(), "bob", "re", "all", plain.id, "ann", "all")
    assert Entry.from_json(reply.id, reply.to_json()) == reply
    assert reply.time_us >= plain.time_us


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


# -- sign up and log in ----------------------------------------------------------------------------
def test_sign_up_signs_in_and_names_are_unique_in_any_case(client, django_region):  # noqa: F811
    assert client.get("/signup/").status_code == 200
    name = username("Su")  # mixed case in: stored lower case
    reply = client.post(
        "/signup/", {"username": name.upper(), "password": PASSWORD, "password_again": PASSWORD}
    )
    assert reply.status_code == 302
    assert reply["Location"] == "/"
    page = html(client.get("/"))
    assert "Your timeline" in page
    assert f"Welcome, @{name}!" in page
    assert f'href="/u/{name}/">@{name}</a>' in page
    user = data_layer().account(name)
    assert (user.username, user.tweets, user.followers, user.following) == (name, 0, 0, 0)

    for again in (name, name.upper(), name.capitalize()):
        other = Client()
        reply = other.post("/signup/", {"username": again, "password": PASSWORD, "password_again": PASSWORD})
        assert reply.status_code == 400
        assert "That username is taken" in html(reply)
        assert "Everyone's tweets" in html(other.get("/"))  # not signed in

    reply = Client().post(
        "/signup/", {"username": "no way!", "password": PASSWORD, "password_again": PASSWORD}
    )
    assert reply.status_code == 400
    assert "Use 2-30 letters, digits or underscores, not underscores alone." in html(reply)
    fresh = username("su")
    reply = Client().post("/signup/", {"username": fresh, "password": PASSWORD, "password_again": "nope1234"})
    assert reply.status_code == 400
    assert "The two passwords differ." in html(reply)
    reply = Client().post("/signup/", {"username": fresh, "password": "short", "password_again": "short"})
    assert reply.status_code == 400
    assert "at least 8 characters" in html(reply)
    sign_up(Client(), fresh)  # the failed attempts did not take the name


def test_login(client, settings, django_region):  # noqa: F811
    settings.PASSWORD_HASHERS = app_settings.PASSWORD_HASHERS  # the real ones, as deployed
    name = username("li")
    sign_up(Client(), name)

    assert client.get("/login/").status_code == 200
    reply = client.post("/login/", {"username": name, "password": PASSWORD + "x"})
    assert reply.status_code == 400
    assert "Unknown username or wrong password" in html(reply)
    reply = client.post("/login/", {"username": username("nobody"), "password": PASSWORD})
    assert reply.status_code == 400
    assert "Unknown username or wrong password" in html(reply)
    assert "Everyone's tweets" in html(client.get("/"))

    reply = client.post("/login/", {"username": f" {name.upper()} ", "password": PASSWORD})
    assert reply.status_code == 302
    assert reply["Location"] == "/"
    page = html(client.get("/"))
    assert "Your timeline" in page
    assert f'href="/u/{name}/">@{name}</a>' in page


@pytest.mark.parametrize(
    ("next_param", "expected"),
    [
        ("/people/", "/people/"),
        ("/u/someone/?after=x", "/u/someone/?after=x"),
        ("http://testserver/public/", "http://testserver/public/"),
        ("https://evil.example/phish", "/"),
        ("//evil.example/phish", "/"),
        ("http://testserver.evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("/\\evil.example", "/"),
        ("", "/"),
    ],
)
def test_login_honours_next_only_on_this_host(client, django_region, next_param, expected):  # noqa: F811
    name = username("nx")
    sign_up(Client(), name)
    page = html(client.get("/login/", {"next": next_param}))
    assert f'name="next" value="{expected}"' in page.replace("&amp;", "&")
    reply = client.post("/login/", {"username": name, "password": PASSWORD, "next": next_param})
    assert reply.status_code == 302
    assert reply["Location"] == expected


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
    eventually(lambda: escaped in html(client.get("/public/")))
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
    with ThreadPoolExecutor(len(jobs)) as pool:
        list(pool.map(lambda job: follow(*job), jobs))

    def shown() -> tuple[int, int]:
        social = data_layer()
        star = social.with_relations(social.account(star_name))
        return star.followers, len(social.followers(star))

    eventually(lambda: shown() == (4, 4), timeout=15)
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
    from webapp.social import BACKFILL

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

    page = eventually(fan_sees_it, timeout=15, interval=0.1)
    assert f'href="/u/{star_name}/">@{star_name}</a>' in page
    assert body not in bodies(html(bystander.get("/")))  # the one fan-out task has run: not here


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
            assert "<script>" not in html(reply).split("<main>", 1)[1]


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
    assert f"Nobody called “{missing}”" in page
    assert "Found <a" not in page
    page = html(client.get("/people/", {"q": "<b>no</b>"}))
    assert "Nobody called “&lt;b&gt;no&lt;/b&gt;”" in page


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
    me = Social(current(), ireland).account(poster_name)
    body = f"written in ireland {unique('t')}"
    Social(current(), ireland).post(me, body)
    reader = Client()
    sign_up(reader, username("near"))
    eventually(lambda: body in html(reader.get(f"/u/{poster_name}/")), timeout=10)
    assert reader.session["label"].startswith(f"{current().region}.")  # a token made here
    store_calls.clear()
    assert reader.get("/").status_code == 200
    assert reader.get(f"/u/{poster_name}/").status_code == 200
    assert "Attach" not in store_calls, store_calls


def test_a_session_that_moved_away_stores_a_migration_label_back(django_region, rf):  # noqa: F811
    """A request whose session migrated (data not replicated here) leaves a migration label
    (§4.3) to this region in the cookie, so the next request's attach waits only for that label."""
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    from causal_client import Label, LabelType
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
    eventually(lambda: body in bodies(html(follower.get("/"))), timeout=20, interval=0.2)
    eventually(lambda: pending_here(current()) == 0, timeout=10, interval=0.2)


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
    eventually(lambda: entry.id in [e.id for e in social.timeline(fan).entries], timeout=20, interval=0.2)
    assert entry.id in [e.id for e in social.public().entries]


def test_a_drained_cell_is_not_delivered_twice(django_region):  # noqa: F811
    """Draining is idempotent: a second drain of the same tweet (a nudge after the sweeper, a
    retry after a crash) finds nothing and writes nothing; a cell put back is delivered to the
    same timeline cell, so the follower still has the tweet once."""
    from webapp.fanout import drain
    from webapp.social import Pending

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


def test_an_unexpected_error_gives_the_500_page(django_region, monkeypatch):  # noqa: F811
    client = Client(raise_request_exception=False)
    monkeypatch.setattr(Social, "public", lambda self, after=None: 1 / 0)
    reply = client.get("/public/")
    assert reply.status_code == 500
    assert "Something went wrong" in html(reply) and "ZeroDivisionError" not in html(reply)


# -- travel hand-offs -------------------------------------------------------------------------------
def handoff_token(client: Client, destination: str = "ireland") -> str:
    reply = client.post("/travel/", {"region": destination})
    assert reply.status_code == 200, html(reply)[:500]
    found = re.search(r'id="handoff"[^>]*>\s*<input type="hidden" name="t" value="([^"]+)">', html(reply))
    assert found, html(reply)[:800]
    return unescape(found.group(1))


def test_an_expired_handoff_is_refused(django_region, monkeypatch):  # noqa: F811
    import time

    from django.core import signing

    from webapp import handoff as travel

    client, _ = new_user("late")
    then = int(time.time()) - travel.MAX_AGE_S - 30  # the token is signed as if made back then
    monkeypatch.setattr(signing.TimestampSigner, "timestamp", lambda self: signing.b62_encode(then))
    token = handoff_token(client, "ireland")
    monkeypatch.undo()
    with pytest.raises(travel.BadHandoff, match="expired"):
        travel.read_handoff(token, "ireland", "any browser")


def test_a_handoff_signs_in_only_its_own_browser_by_post_only(django_region, settings, web_cluster):  # noqa: F811
    """The hand-off is bound to the browser that asked for it (address and User-Agent): another
    address or another User-Agent with a copy is refused without using it up; a GET never
    arrives; the browser itself arrives once, with no CSRF token (another region's page posts)."""
    from helpers.web import point_django_at

    from webapp.causal import USER_KEY

    client, name = new_user("goer")
    client.defaults.update(HTTP_USER_AGENT="goer's browser", REMOTE_ADDR="10.0.0.7")
    token = handoff_token(client, "ireland")
    point_django_at(settings, web_cluster, "ireland")
    assert Client().get("/arrive/", {"t": token}).status_code == 405
    for thief in ({"HTTP_USER_AGENT": "goer's browser", "REMOTE_ADDR": "10.0.0.8"},
                  {"HTTP_USER_AGENT": "another browser", "REMOTE_ADDR": "10.0.0.7"}):  # fmt: skip
        copy = Client(enforce_csrf_checks=True, **thief)
        refused = copy.post("/arrive/", {"t": token})
        assert refused.status_code == 400 and "another browser" in html(refused)
        assert USER_KEY not in copy.session
    owner = Client(enforce_csrf_checks=True, HTTP_USER_AGENT="goer's browser", REMOTE_ADDR="10.0.0.7")
    arrived = owner.post("/arrive/", {"t": token})
    assert arrived.status_code == 302 and owner.session[USER_KEY] == name
    again = Client(HTTP_USER_AGENT="goer's browser", REMOTE_ADDR="10.0.0.7").post("/arrive/", {"t": token})
    assert again.status_code == 400 and "already used" in html(again)


def test_a_token_made_at_another_region_resumes_by_migration(django_region, rf, store_calls):  # noqa: F811
    """A cookie whose token was made elsewhere (a request that moved away and could not make a
    migration label back) resumes with a migration from that region: its writes there are here."""
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    from webapp.causal import LABEL_KEY, CausalRequest

    ctx = current()
    elsewhere = ctx.client.session("ireland")
    row = unique("row")
    elsewhere.write("all", row, {"v": "there"})
    request = rf.get("/")
    request.session = SessionStore()
    request.session[LABEL_KEY] = elsewhere.token
    store_calls.clear()
    causal = CausalRequest(request, ctx)
    assert causal.session.read("all", row).text("v") == "there"
    assert store_calls[:2] == ["Migrate", "Attach"] and causal.session.region == ctx.region


# -- accounts and error pages done properly --------------------------------------------------------
def test_logins_are_throttled_per_account_even_with_the_right_password(django_region, settings):  # noqa: F811
    """ACCOUNT_LIMIT failures in a window lock the account for the rest of it, whatever comes
    next (the password is not even tried); other accounts are not locked."""
    settings.PASSWORD_HASHERS = FAST_HASHERS
    name, other = username("th"), username("th")
    sign_up(Client(), name)
    sign_up(Client(), other)
    client = Client(REMOTE_ADDR="10.9.8.7")
    for _ in range(throttle.ACCOUNT_LIMIT):
        assert client.post("/login/", {"username": name, "password": "wrong-guess"}).status_code == 400
    reply = client.post("/login/", {"username": name, "password": PASSWORD})
    assert reply.status_code == 429
    assert "Too many failed logins" in html(reply)
    assert 0 < int(reply["Retry-After"]) <= 2 * throttle.WINDOW_S
    assert "Your timeline" not in html(client.get("/"))
    assert client.post("/login/", {"username": other, "password": PASSWORD}).status_code == 302


def test_logins_are_throttled_per_client_address(django_region, settings, monkeypatch):  # noqa: F811
    settings.PASSWORD_HASHERS = FAST_HASHERS
    monkeypatch.setattr(throttle, "ADDRESS_LIMIT", 3)
    monkeypatch.setattr(throttle, "KINDS", (("account", throttle.ACCOUNT_LIMIT), ("address", 3)))
    name = username("ad")
    sign_up(Client(), name)
    guesser = Client(REMOTE_ADDR="10.1.2.3")
    for _ in range(3):  # three different accounts, one address
        assert guesser.post("/login/", {"username": username("no"), "password": "x-guess"}).status_code == 400
    assert guesser.post("/login/", {"username": name, "password": PASSWORD}).status_code == 429
    elsewhere = Client(REMOTE_ADDR="10.3.2.1")
    assert elsewhere.post("/login/", {"username": name, "password": PASSWORD}).status_code == 302


def test_throttle_windows_slide(django_region, rf):  # noqa: F811
    """Failures count in their window and the next one, then no more."""
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    from webapp.causal import CausalRequest

    request = rf.get("/")
    request.session = SessionStore()
    causal = CausalRequest(request, current())
    name, address, start = username("win"), "10.0.0.1", 1_000 * throttle.WINDOW_S
    for _ in range(throttle.ACCOUNT_LIMIT):
        throttle.failed(causal, name, address, now=start)
    assert not throttle.check(causal, name, address, now=start + 1).allowed
    assert not throttle.check(causal, name, address, now=start + throttle.WINDOW_S).allowed
    assert throttle.check(causal, name, address, now=start + 2 * throttle.WINDOW_S).allowed


def test_every_error_status_has_a_page(client, django_region):  # noqa: F811
    reply = client.get("/logout/")
    assert reply.status_code == 405
    assert "Method Not Allowed" in html(reply) and "does not take that kind of request" in html(reply)
    assert reply["Allow"] == "POST"


def test_a_too_big_request_says_so_and_names_no_setting(client, django_region, settings):  # noqa: F811
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    reply = client.post("/login/", {"username": "x", "password": "y" * 5000})
    assert reply.status_code == 413
    assert "larger than this site accepts" in html(reply)
    assert "DATA_UPLOAD" not in html(reply)


def test_client_errors_are_logged_in_one_line():
    """The console handler drops the traceback of 4xx records, keeps it for 5xx."""
    handler = app_settings.LOGGING["handlers"]["console"]
    assert "one_line_4xx" in handler["filters"]
    check = OneLineClientErrors()
    for status, kept in ((400, False), (403, False), (500, True)):
        try:
            raise ValueError("boom")
        except ValueError:
            info = sys.exc_info()
        record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "x", (), info)
        record.status_code = status
        assert check.filter(record)
        assert (record.exc_info is not None) is kept


# -- sessions: racing tabs, and the label marks -------------------------------------------------------
def test_a_racing_tab_cannot_lower_the_sessions_label(django_region):  # noqa: F811
    """Two tabs of one session: the slower one was sent the older cookie and reads nothing new.
    Its response still stores a label at least as high as the other tab's (the region's mark
    for the session family), so the next hand-off covers what either tab saw."""
    from causal_client import SessionToken
    from webapp.causal import LABEL_KEY

    def label_of(client: Client) -> Label:
        return SessionToken.parse(client.session[LABEL_KEY]).label

    tab_one, _ = new_user("tabs")
    tab_two = Client()
    tab_two.cookies = SimpleCookie({k: v.value for k, v in tab_one.cookies.items()})
    assert tab_one.post("/post/", {"body": "seen in tab one only"}).status_code == 302
    higher = label_of(tab_one)
    assert tab_two.get("/people/").status_code == 200  # reads the directory, not the new tweet
    assert higher <= label_of(tab_two)


def test_later_token_keeps_the_greater_label():
    from causal_client import SessionToken
    from webapp.label_marks import later_token

    low, high = Label(ts=10, src="virginia/0"), Label(ts=20, src="ireland/0")
    here = lambda label: SessionToken(label, "virginia").encode()  # noqa: E731
    assert later_token(here(low), here(high)) == here(high)
    assert later_token(here(high), here(low)) == here(high)
    assert later_token(None, here(low)) == here(low)
    assert later_token(here(low), None) == here(low)
    assert later_token(here(high), low.to_token()) == here(high)
    assert later_token(here(low), "not a token") == "not a token"


# -- likes, reposts, avatars, times, mentions and links ------------------------------------------------
def first_tweet_path(page: str) -> str:
    found = re.search(r'<a class="time" href="(/t/[^"]+/)"', page)
    assert found, page[:800]
    return found.group(1)


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
    author, author_name = new_user("orig")
    reposter, reposter_name = new_user("rp")
    follower, _ = new_user("rpfan")
    assert follower.post(f"/u/{reposter_name}/follow/").status_code == 302
    assert author.post("/post/", {"body": "worth sharing"}).status_code == 302
    path = first_tweet_path(html(author.get("/")))
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


def test_mentions_and_links_are_links_and_nothing_else_is_markup(django_region):  # noqa: F811
    client, _name = new_user("links")
    body = 'hi @Alice_1 see https://example.com/a?b=1&c=2. <b>x</b> javascript:alert(1) "@x'
    assert client.post("/post/", {"body": body}).status_code == 302
    shown = bodies(html(client.get("/")))[0]
    assert '<a class="mention" href="/u/alice_1/">@Alice_1</a>' in shown
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
