"""Settings: one's profile (display name, bio, picture), a new password (signing out every other
browser session) and leaving (webapp/profiles.py)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.hashers import make_password
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from webapp.forms import DeleteAccountForm, PasswordChangeForm, ProfileForm, password_rules
from webapp.social_core import USERNAME_PATTERN
from webapp.views.pages import signed_in


def page(request: HttpRequest, status: int = 200, **forms) -> HttpResponse:
    me = request.causal.account
    initial = {"display": me.display, "bio": me.bio}
    context = {
        "me": me,
        "profile_form": forms.get("profile_form") or ProfileForm(initial=initial),
        "password_form": forms.get("password_form") or PasswordChangeForm(username=me.username),
        "delete_form": forms.get("delete_form") or DeleteAccountForm(username=me.username),
        "password_rules": password_rules(),
    }
    return render(request, "settings.html", context, status=status)


@require_GET
@signed_in
def settings_page(request: HttpRequest) -> HttpResponse:
    return page(request)


@require_POST
@signed_in
def profile(request: HttpRequest) -> HttpResponse:
    me, social = request.causal.account, request.causal.social
    form = ProfileForm(request.POST, request.FILES)
    if not form.is_valid():
        return page(request, 400, profile_form=form)
    social.update_profile(me, form.cleaned_data["display"], form.cleaned_data["bio"])
    if form.cleaned_data["avatar"] is not None:
        social.set_avatar(me, form.cleaned_data["avatar"])
    elif form.cleaned_data["remove_avatar"]:
        social.set_avatar(me, None)
    messages.success(request, "Your profile is saved.")
    return redirect("user", username=me.username)


@require_POST
@signed_in
def password(request: HttpRequest) -> HttpResponse:
    causal = request.causal
    me = causal.account
    form = PasswordChangeForm(request.POST, username=me.username, password_hash=me.password_hash)
    if not form.is_valid():
        return page(request, 400, password_form=form)
    signed_out_before = causal.social.change_password(me, make_password(form.cleaned_data["password"]))
    causal.sign_in(
        me.username, note="password changed", family=causal.family, signed_in_us=signed_out_before + 1
    )
    messages.success(request, "Your password is changed; every other browser is signed out.")
    return redirect("settings")


@require_POST
@signed_in
def delete(request: HttpRequest) -> HttpResponse:
    causal = request.causal
    me = causal.account
    form = DeleteAccountForm(request.POST, username=me.username, password_hash=me.password_hash)
    if not form.is_valid():
        return page(request, 400, delete_form=form)
    causal.social.delete_account(me)
    causal.sign_out(everywhere=True)
    messages.info(request, f"@{me.username} is deleted. Its name stays taken.")
    return redirect("home")


@require_GET
def picture(request: HttpRequest, username: str, version: str) -> HttpResponse:
    """An uploaded picture, from this region's store: the URL names its version, so it is kept
    for good (a new picture has a new URL); another version, or none, is a 404."""
    if not USERNAME_PATTERN.match(username) or not version.isdigit():
        raise Http404("no such picture")
    image, stored = request.causal.social.avatar_of(username)
    if image is None or stored != version:
        raise Http404("no such picture")
    reply = HttpResponse(image, content_type="image/webp")
    reply["Cache-Control"] = "public, max-age=31536000, immutable"
    return reply
