"""The web app's forms and entry format, alone (no cluster, no request)."""

from __future__ import annotations

import pytest
from helpers.pages import (
    PASSWORD,
)

from webapp.forms import FindForm, PostForm, SignupForm, valid_cursor
from webapp.social_core import MAX_TWEET_CHARS
from webapp.social_values import Entry, new_tweet_id


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
