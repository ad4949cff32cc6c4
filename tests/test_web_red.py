"""Sign-up through the usernames' strong registers (webapp/accounts.py): it works with a minority
of regions down and says clearly when a majority is gone; an unknown outcome never frees a name
(no takeover of an account whose write may have landed); accounts from before the registers keep
their names. In-process views against a launched demo-3region of its own (its stores are killed)."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import check_password, make_password
from django.test import Client
from helpers.pages import PASSWORD, data_layer, html, sign_up, username
from helpers.web import FAST_HASHERS, django_region, fast_hashes, web_cluster  # noqa: F401  (fixtures)

from causal_client import OutcomeUnknown
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
    import threading

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
