"""Chirp's red operations (docs/REDBLUE.md), through the views. Sign-up on the usernames' strong
registers (webapp/accounts.py): it works with a minority of regions down and says clearly when a
majority is gone; an unknown outcome never frees a name (no takeover of an account whose write may
have landed); accounts from before the registers keep their names. Pinned tweets
(webapp/pins.py): at most three, also when every region pins at once. In-process views against a
launched demo-3region of its own (its stores are killed)."""

from __future__ import annotations

import re
import threading

import pytest
from django.contrib.auth.hashers import check_password, make_password
from django.test import Client
from helpers.pages import PASSWORD, data_layer, html, new_user, sign_up, tweet_refs, username
from helpers.web import FAST_HASHERS, django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client import CausalClient, OutcomeUnknown
from webapp import pins
from webapp.social import Social

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def post_signup(client: Client, name: str, password: str = PASSWORD):
    return client.post("/signup/", {"username": name, "password": password, "password_again": password})


def test_sign_up_works_with_a_region_down_and_says_when_most_are(web_cluster, django_region):  # noqa: F811
    others = [r for r in web_cluster.topology.region_names if r != django_region]
    web_cluster.kill(f"{others[1]}.redis0")
    try:
        sign_up(Client(), username("minority"))  # two of three regions: a majority
        web_cluster.kill(f"{others[0]}.redis0")
        try:
            browser, name = Client(), username("majority")
            reply = post_signup(browser, name)
            assert reply.status_code == 503
            assert "most regions" in html(reply) and all(r in html(reply) for r in others)
        finally:
            web_cluster.restart(f"{others[0]}.redis0")
        assert post_signup(browser, name).status_code == 302  # the same browser, once they are back
    finally:
        web_cluster.restart(f"{others[1]}.redis0")


def test_an_unknown_outcome_never_frees_a_name(django_region, monkeypatch):  # noqa: F811
    """The account write lands but its reply is lost. Before the registers, sign-up gave the name
    back on any error, and the next sign-up of it overwrote the account (a takeover)."""
    create = Social.create_account

    def lands_then_fails(self, *args, **kwargs):
        create(self, *args, **kwargs)
        raise OutcomeUnknown("the connection broke after the write was sent")

    first, name = Client(), username("unknown")
    monkeypatch.setattr(Social, "create_account", lands_then_fails)
    reply = post_signup(first, name, "first-password")
    assert reply.status_code == 202 and "could not confirm" in html(reply)  # not done, not failed
    monkeypatch.setattr(Social, "create_account", create)
    reply = post_signup(Client(), name, "takeover-password")  # another browser
    assert reply.status_code == 400 and "taken" in html(reply)
    assert check_password("first-password", data_layer().account(name).password_hash)
    assert post_signup(first, name, "first-password").status_code == 302  # its retry completes it


def test_accounts_from_before_the_registers_keep_their_names(django_region):  # noqa: F811
    name = username("legacy")
    data_layer().create_account(name, make_password("old-password"), "all")  # no claim token
    reply = post_signup(Client(), name)
    assert reply.status_code == 400 and "taken" in html(reply)
    assert check_password("old-password", data_layer().account(name).password_hash)


def test_of_concurrent_sign_ups_for_one_name_one_wins(django_region):  # noqa: F811
    name, replies = username("race"), []
    start = threading.Barrier(4)

    def attempt() -> None:
        browser = Client()
        start.wait()
        replies.append(post_signup(browser, name).status_code)

    threads = [threading.Thread(target=attempt) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(replies) == [302, 400, 400, 400], replies


def pinned_on(page: str) -> list[str]:
    """The bodies in a profile's "Pinned" section, in order."""
    section = re.search(r'<section class="pinned".*?</section>', page, flags=re.S)
    return re.findall(r'<p class="body">(.*?)</p>', section.group(0), flags=re.S) if section else []


def test_pins_are_limited_to_three_and_shown_first(django_region):  # noqa: F811
    browser, me = new_user("pin")
    for n in range(4):
        assert browser.post("/post/", {"body": f"tweet {n}"}).status_code == 302
    refs = tweet_refs(html(browser.get(f"/u/{me}/")))  # newest first: tweet 3 .. tweet 0
    assert "Pin to your profile" in html(browser.get(f"/t/{refs[0][0]}/{refs[0][1]}/"))
    for group, tweet_id in refs[1:]:
        assert browser.post(f"/t/{group}/{tweet_id}/pin/").status_code == 302
    page = html(browser.get(f"/u/{me}/"))
    assert pinned_on(page) == ["tweet 0", "tweet 1", "tweet 2"]  # the last pinned on top
    pinned_page = html(browser.get(f"/t/{refs[1][0]}/{refs[1][1]}/"))  # a pinned tweet: Unpin, not Pin
    assert "Unpin from your profile" in pinned_page and "Pin to your profile" not in pinned_page
    refused = browser.post(f"/t/{refs[0][0]}/{refs[0][1]}/pin/", follow=True)
    assert "at most 3" in html(refused)
    assert pinned_on(html(browser.get(f"/u/{me}/"))) == ["tweet 0", "tweet 1", "tweet 2"]
    assert browser.post(f"/t/{refs[2][0]}/{refs[2][1]}/unpin/").status_code == 302  # tweet 1
    assert browser.post(f"/t/{refs[0][0]}/{refs[0][1]}/pin/").status_code == 302
    assert pinned_on(html(browser.get(f"/u/{me}/"))) == ["tweet 3", "tweet 0", "tweet 2"]
    assert "Unpin" in html(browser.get(f"/u/{me}/"))
    stranger, _ = new_user("notmine")
    assert stranger.post(f"/t/{refs[0][0]}/{refs[0][1]}/pin/").status_code == 403
    assert "Unpin" not in html(stranger.get(f"/u/{me}/"))


def race_pins(sessions: list, me: str, tweets: list[pins.Pinned]) -> list[str]:
    """Each session pins its tweet at the same moment; what each was told, sorted."""
    outcomes: list[str] = []
    start = threading.Barrier(len(sessions))

    def attempt(session, tweet: pins.Pinned) -> None:
        start.wait()
        try:
            pins.pin(session, me, "all", tweet)
            outcomes.append("pinned")
        except pins.PinLimit:
            outcomes.append("limit")

    threads = [threading.Thread(target=attempt, args=pair) for pair in zip(sessions, tweets, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


def test_pins_from_every_region_at_once_never_exceed_the_limit(web_cluster, django_region):  # noqa: F811
    """Each round, the user has one pin and every region pins a different tweet at once: only two
    fit, which a blue (causal) pin, deciding from its region's view alone, cannot know."""
    social = data_layer()
    me = username("race_pin")
    social.create_account(me, make_password(PASSWORD), "all")
    clients = [
        CausalClient.connect(web_cluster.topology.client_address(r), site=web_cluster.topology.region(r).site)
        for r in web_cluster.topology.region_names
    ]
    try:
        for round_ in range(4):
            first = pins.Pinned("all", f"r{round_}-first")
            sessions = [c.session(r) for c, r in zip(clients, web_cluster.topology.region_names, strict=True)]
            for old in pins.pinned(sessions[0], me, "all"):
                pins.unpin(sessions[0], me, "all", old)
            pins.pin(sessions[0], me, "all", first)
            outcomes = race_pins(sessions, me, [pins.Pinned("all", f"r{round_}-{n}") for n in range(3)])
            final = pins.parse(sessions[0].strong_read(pins.PINS, me).value)
            assert outcomes == ["limit", "pinned", "pinned"], outcomes
            assert len(final) == 3 and first in final, final
            assert pins.pinned(sessions[0], me, "all") == final  # the copy, read where it was written
    finally:
        for client in clients:
            client.close()
