"""Forms: every field validated here, so views only see clean input."""

from __future__ import annotations

import re
from types import SimpleNamespace

from django import forms
from django.contrib.auth import password_validation
from django.contrib.auth.hashers import check_password
from django.core.exceptions import ValidationError

from webapp.profiles import MAX_BIO, MAX_DISPLAY, MAX_UPLOAD_BYTES, BadImage, avatar_image
from webapp.social_core import MAX_TWEET_CHARS, USERNAME_PATTERN

# "<group>/<tweet id>"; a group name as topology files allow (services/topology.py NAME_PATTERN)
TWEET_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}/[0-9a-f]{22}$")
CURSOR = re.compile(r"\A[0-9a-f]{22}\Z")  # \Z: no trailing newline slips through


class SignupForm(forms.Form):
    username = forms.CharField(
        max_length=30, help_text="2-30 letters, digits or underscores; unique across all regions."
    )
    password = forms.CharField(min_length=8, max_length=128, widget=forms.PasswordInput, strip=False)
    password_again = forms.CharField(
        label="Password (again)", max_length=128, widget=forms.PasswordInput, strip=False
    )

    def clean_username(self) -> str:
        name = self.cleaned_data["username"].strip().lower()
        if not USERNAME_PATTERN.match(name):
            raise ValidationError("Use 2-30 letters, digits or underscores, not underscores alone.")
        return name

    def clean(self) -> dict:
        data = super().clean()
        check_new_password(self, data, data.get("username", ""))
        return data


def check_new_password(form: forms.Form, data: dict, username: str) -> None:
    """A new password's two copies agree and it passes the validators (settings.py), as errors
    on the form's fields."""
    password = data.get("password")
    if password and password != data.get("password_again"):
        form.add_error("password_again", "The two passwords differ.")
    elif password:
        try:
            password_validation.validate_password(password, Applicant(username))
        except ValidationError as error:
            form.add_error("password", error)


def password_rules() -> list[str]:
    """The validators' rules, to show before anyone types a password."""
    return password_validation.password_validators_help_texts()


class Applicant:
    """Who signs up, as Django's similarity validator reads a user (attributes and, in ``_meta``,
    their names): there is no user model here, the accounts live in the store."""

    _meta = SimpleNamespace(get_field=lambda name: SimpleNamespace(verbose_name=name))

    def __init__(self, username: str):
        self.username = username


class NotOnlyBlanks:
    """A password validator: spaces, tabs and line breaks alone are no password."""

    def validate(self, password: str, user: object = None) -> None:
        if not password.strip():
            raise ValidationError("A password needs more than blanks.", code="password_blank")

    def get_help_text(self) -> str:
        return "Your password cannot be blanks only."


class ProfileForm(forms.Form):
    display = forms.CharField(label="Display name", max_length=MAX_DISPLAY, required=False)
    bio = forms.CharField(
        label="Bio", max_length=MAX_BIO, required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    avatar = forms.FileField(
        label="Picture", required=False, help_text="PNG, JPEG, GIF or WebP, up to 2 MB; cut square."
    )
    remove_avatar = forms.BooleanField(label="Use the drawn picture again", required=False)

    def clean_display(self) -> str:
        return printable(self.cleaned_data["display"], "A display name")

    def clean_bio(self) -> str:
        return printable(self.cleaned_data["bio"].replace("\r\n", "\n"), "A bio", lines=True)

    def clean_avatar(self) -> bytes | None:
        upload = self.cleaned_data.get("avatar")
        if upload is None:
            return None
        if upload.size > MAX_UPLOAD_BYTES:
            raise ValidationError(f"The picture is larger than {MAX_UPLOAD_BYTES >> 20} MB.")
        try:
            return avatar_image(upload.read())
        except BadImage as bad:
            raise ValidationError(str(bad)) from None


def printable(text: str, what: str, lines: bool = False) -> str:
    """``text`` stripped; a ValidationError for control characters (line breaks where allowed)."""
    allowed = "\n" if lines else ""
    if any((ord(c) < 32 and c not in allowed) or ord(c) == 127 for c in text):
        raise ValidationError(f"{what} cannot hold control characters.")
    return text.strip()


class OwnAccountForm(forms.Form):
    """A settings form the signed-in user confirms with their password: ``checked_field`` must
    hold the one whose hash is ``password_hash``; its fields get ids of their own (``ids``: the
    settings page holds two password fields)."""

    checked_field = "password"
    wrong = "That is not your password."
    ids = "id_%s"

    def __init__(self, *args, username: str = "", password_hash: str = "", **kwargs):
        kwargs.setdefault("auto_id", self.ids)
        super().__init__(*args, **kwargs)
        self.username, self.password_hash = username, password_hash

    def clean(self) -> dict:
        data = super().clean()
        given = data.get(self.checked_field)
        if given is not None and not check_password(given, self.password_hash):
            self.add_error(self.checked_field, self.wrong)
        return data


class PasswordChangeForm(OwnAccountForm):
    checked_field, ids = "current", "change_%s"
    wrong = "That is not your current password."
    current = forms.CharField(
        label="Current password", max_length=128, widget=forms.PasswordInput, strip=False
    )
    password = forms.CharField(
        label="New password", min_length=8, max_length=128, widget=forms.PasswordInput, strip=False
    )
    password_again = forms.CharField(
        label="New password (again)", max_length=128, widget=forms.PasswordInput, strip=False
    )

    def clean(self) -> dict:
        data = super().clean()
        check_new_password(self, data, self.username)
        return data


class DeleteAccountForm(OwnAccountForm):
    ids = "leave_%s"
    confirm = forms.CharField(label="Type your username to confirm", max_length=31)
    password = forms.CharField(label="Password", max_length=128, widget=forms.PasswordInput, strip=False)

    def clean_confirm(self) -> str:
        typed = self.cleaned_data["confirm"].strip().lower().removeprefix("@")
        if typed != self.username:
            raise ValidationError("That is not your username.")
        return typed


class LoginForm(forms.Form):
    username = forms.CharField(max_length=30)
    password = forms.CharField(max_length=128, widget=forms.PasswordInput, strip=False)

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip().lower()


class TweetField(forms.CharField):
    """Browsers send a textarea's line breaks as CRLF but count them as one character (as its
    maxlength does): so do we."""

    def to_python(self, value):
        value = super().to_python(value)
        return value.replace("\r\n", "\n") if isinstance(value, str) else value


class PostForm(forms.Form):
    body = TweetField(
        label="What's happening?",
        max_length=MAX_TWEET_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "A tweet needs some text."},
    )
    reply_to = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_body(self) -> str:
        body = self.cleaned_data["body"].strip()
        if not body:
            raise ValidationError("A tweet needs some text.")
        return body

    def clean_reply_to(self) -> str:
        ref = self.cleaned_data.get("reply_to") or ""
        if ref and not TWEET_REF.match(ref):
            raise ValidationError("Not a tweet reference.")
        return ref


class FindForm(forms.Form):
    q = forms.CharField(label="Username", max_length=31, required=False)  # 30 and an "@"

    def clean_q(self) -> str:
        name = self.cleaned_data["q"].strip().lower().removeprefix("@")
        if len(name) > 30:
            raise ValidationError("Usernames have at most 30 characters.")
        return name


class SearchForm(forms.Form):
    q = forms.CharField(label="Search", max_length=100, required=False)

    def clean_q(self) -> str:
        return " ".join(self.cleaned_data["q"].split())


def valid_cursor(value: str | None) -> str | None:
    """A pagination cursor from the query string, or None; raises ValueError when malformed."""
    if not value:
        return None
    if not CURSOR.match(value):
        raise ValueError(f"not a page cursor: {value[:40]!r}")
    return value
