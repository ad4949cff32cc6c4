"""Block, unblock, mute and unmute (webapp/blocks.py): forms on a user's page, each a POST that
comes back to that page with what it did."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from webapp.social_values import Account
from webapp.views.errors import ShownBadRequest
from webapp.views.pages import account_or_404, signed_in


def _on_someone(
    request: HttpRequest, username: str, verb: str, act: Callable[[Account], None], done: str, undone: str,
    undo: bool,
) -> HttpResponse:  # fmt: skip
    """What the four share: the other user (not oneself), the change, its message, back to their page."""
    user = account_or_404(request, username)
    if user.username == request.causal.account.username:
        raise ShownBadRequest(f"You cannot {verb} yourself.")
    act(user)
    if undo:
        messages.info(request, undone.format(name=user.username))
    else:
        messages.success(request, done.format(name=user.username))
    return redirect("user", username=user.username)


@require_POST
@signed_in
def block(request: HttpRequest, username: str, undo: bool = False) -> HttpResponse:
    """Blocking takes the follows away both ways; neither sees the other's tweets after it."""
    me, social = request.causal.account, request.causal.social
    return _on_someone(
        request, username, "block", lambda user: social.block(me, user, undo=undo),
        "You block @{name}: neither of you follows or sees the other now.",
        "You no longer block @{name}.", undo,
    )  # fmt: skip


@require_POST
@signed_in
def mute(request: HttpRequest, username: str, undo: bool = False) -> HttpResponse:
    """Muting hides someone from your lines and notices; they are not told."""
    me, social = request.causal.account, request.causal.social
    return _on_someone(
        request, username, "mute", lambda user: social.mute(me, user.username, undo=undo),
        "You mute @{name}: their tweets stay out of your lines.", "You no longer mute @{name}.", undo,
    )  # fmt: skip
