"""Accounts and sessions: sign-up, log-in and its throttling, error pages, travel hand-offs, and
sessions that end and cannot be lowered (in-process views against a launched demo-3region)."""

from __future__ import annotations

import logging
import re
import sys
from html import unescape
from http.cookies import SimpleCookie

import pytest
from django.test import Client
from helpers.pages import (
    PASSWORD,
    data_layer,
    html,
    new_user,
    sign_up,
    username,
)
from helpers.waiting import unique
from helpers.web import FAST_HASHERS, django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client import Label
from webapp import settings as app_settings
from webapp import throttle
from webapp.context import current
from webapp.views.errors import OneLineClientErrors

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


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


# -- accounts and error pages done properly --------------------------------------------------------
def test_an_attacker_locks_out_only_their_own_address(django_region, settings, monkeypatch):  # noqa: F811
    """PAIR_LIMIT failures from one address lock that address out of the account, whatever comes
    next (the password is not even tried); the real user, from another address, still logs in,
    and the attacker's address may still try other accounts."""
    settings.PASSWORD_HASHERS = FAST_HASHERS
    monkeypatch.setattr(throttle, "FREE_FAILURES", 10_000)  # the limit, not the delays, here
    name, other = username("th"), username("th")
    sign_up(Client(), name)
    sign_up(Client(), other)
    attacker = Client(REMOTE_ADDR="10.9.8.7")
    for _ in range(throttle.PAIR_LIMIT):
        assert attacker.post("/login/", {"username": name, "password": "wrong-guess"}).status_code == 400
    reply = attacker.post("/login/", {"username": name, "password": PASSWORD})
    assert reply.status_code == 429
    assert "Too many failed logins" in html(reply)
    assert throttle.WINDOW_S < int(reply["Retry-After"]) <= 2 * throttle.WINDOW_S  # the real wait
    said = re.search(r"try again in (\d+) min", html(reply))
    assert said and int(said.group(1)) == -(-int(reply["Retry-After"]) // 60), "the message says the same"
    assert "Your timeline" not in html(attacker.get("/"))
    assert attacker.post("/login/", {"username": other, "password": PASSWORD}).status_code == 302
    user = Client(REMOTE_ADDR="10.1.1.1")
    assert user.post("/login/", {"username": name, "password": PASSWORD}).status_code == 302


def test_logins_are_throttled_per_client_address(django_region, settings, monkeypatch):  # noqa: F811
    settings.PASSWORD_HASHERS = FAST_HASHERS
    monkeypatch.setattr(throttle, "KINDS", (("pair", throttle.PAIR_LIMIT), ("address", 3)))
    name = username("ad")
    sign_up(Client(), name)
    guesser = Client(REMOTE_ADDR="10.1.2.3")
    for _ in range(3):  # three different accounts, one address
        assert guesser.post("/login/", {"username": username("no"), "password": "x-guess"}).status_code == 400
    assert guesser.post("/login/", {"username": name, "password": PASSWORD}).status_code == 429
    elsewhere = Client(REMOTE_ADDR="10.3.2.1")
    assert elsewhere.post("/login/", {"username": name, "password": PASSWORD}).status_code == 302


def causal_request():
    from django.contrib.sessions.backends.signed_cookies import SessionStore
    from django.test import RequestFactory

    from webapp.causal import CausalRequest

    request = RequestFactory().get("/")
    request.session = SessionStore()
    return CausalRequest(request, current())


def test_throttle_windows_slide_and_say_the_real_wait(django_region, monkeypatch):  # noqa: F811
    """Failures count in their window and the next one, then no more; a refusal says when the
    count really drops below the limit (not merely when this window ends)."""
    monkeypatch.setattr(throttle, "FREE_FAILURES", 10_000)
    causal = causal_request()
    name, address, start = username("win"), "10.0.0.1", 1_000 * throttle.WINDOW_S
    for _ in range(throttle.PAIR_LIMIT):
        throttle.failed(causal, name, address, now=start)
    assert throttle.check(causal, name, address, now=start + 1) == throttle.Verdict(
        False, 2 * throttle.WINDOW_S
    )
    assert throttle.check(causal, name, address, now=start + throttle.WINDOW_S) == throttle.Verdict(
        False, throttle.WINDOW_S + 1
    )
    assert throttle.check(causal, name, address, now=start + 2 * throttle.WINDOW_S).allowed
    assert throttle.check(causal, name, "10.0.0.2", now=start + 1).allowed  # another address


def test_a_pairs_failures_grow_its_delay(django_region):  # noqa: F811
    """The first FREE_FAILURES failures cost nothing; each later one doubles the wait."""
    causal = causal_request()
    name, address, start = username("grow"), "10.0.0.9", 2_000 * throttle.WINDOW_S + 10
    for n in range(throttle.FREE_FAILURES - 1):
        throttle.failed(causal, name, address, now=start + n)
    assert throttle.check(causal, name, address, now=start + 5).allowed
    waited = start + 5
    for delay in (1, 2, 4, 8):
        throttle.failed(causal, name, address, now=waited)
        assert throttle.check(causal, name, address, now=waited + delay - 0.5) == throttle.Verdict(False, 1)
        assert throttle.check(causal, name, address, now=waited + delay + 0.01).allowed
        waited += delay + 0.01


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


def test_a_handoff_is_taken_from_our_pages_by_its_own_browser_once(django_region, settings, web_cluster):  # noqa: F811
    """The hand-off is taken only from the deployment's own pages (``Origin``: a stranger's page
    pushing its own hand-off at a victim is refused) and only from the browser that asked for it
    (address and User-Agent): a copy is refused without being used up; a GET never arrives; the
    browser itself arrives once, with no CSRF token (another region's page posts)."""
    from helpers.web import point_django_at

    from webapp.causal import USER_KEY

    browser = {"HTTP_USER_AGENT": "goer's browser", "REMOTE_ADDR": "10.0.0.7"}
    ours = {"HTTP_ORIGIN": web_cluster.topology.web_url("virginia")}
    client, name = new_user("goer")
    client.defaults.update(browser)
    token = handoff_token(client, "ireland")
    point_django_at(settings, web_cluster, "ireland")
    assert Client().get("/arrive/", {"t": token}).status_code == 405
    refusals = [
        ({**browser, "REMOTE_ADDR": "10.0.0.8", **ours}, "another browser"),
        ({**browser, "HTTP_USER_AGENT": "another browser", **ours}, "another browser"),
        ({**browser, "HTTP_ORIGIN": "https://evil.example"}, "own pages"),
        (browser, "own pages"),  # no Origin: not sent by a page of ours
    ]
    for headers, why in refusals:
        copy = Client(enforce_csrf_checks=True, **headers)
        refused = copy.post("/arrive/", {"t": token})
        assert refused.status_code == 400 and why in html(refused), (headers, html(refused)[:300])
        assert USER_KEY not in copy.session
    owner = Client(enforce_csrf_checks=True, **browser, **ours)
    arrived = owner.post("/arrive/", {"t": token})
    assert arrived.status_code == 302 and owner.session[USER_KEY] == name
    again = Client(**browser, **ours).post("/arrive/", {"t": token})
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


def test_later_token_keeps_the_greater_label_and_never_claims_a_past_where_it_may_not_be():
    from causal_client import LabelType, SessionToken
    from webapp.label_marks import later_token

    low, high = Label(ts=10, src="virginia/0"), Label(ts=20, src="ireland/0")
    here = lambda label: SessionToken(label, "virginia").encode()  # noqa: E731
    assert later_token(here(low), here(high)) == here(high)
    assert later_token(here(high), here(low)) == here(high)
    assert later_token(None, here(low)) == here(low)
    assert later_token(here(low), None) == here(low)
    assert later_token(here(low), "not a token") == "not a token"
    # A bare label: nothing says where its past is, so neither token's region is claimed.
    assert later_token(here(high), low.to_token()) == high.to_token()
    back = Label(ts=15, src="frankfurt/0", type=LabelType.MIGRATION, target="virginia")
    assert later_token(here(low), back.to_token()) == back.to_token(), "a migration label here covers it"
    assert later_token(here(high), back.to_token()) == high.to_token(), "not above the other: plain"
    assert later_token(SessionToken(low, "ireland").encode(), back.to_token()) == back.as_past().to_token()


def test_logging_out_with_the_store_down_still_signs_out_here_and_says_so(django_region, monkeypatch):  # noqa: F811
    from causal_client import RegionUnavailable
    from webapp.causal import USER_KEY
    from webapp.social import Social

    client, _ = new_user("outdown")

    def unavailable(self, family):
        raise RegionUnavailable("region virginia is unavailable")

    monkeypatch.setattr(Social, "end_sessions", unavailable)
    reply = client.post("/logout/", follow=True)
    assert reply.status_code == 200 and USER_KEY not in client.session
    assert "the other regions could not be told yet" in html(reply)
