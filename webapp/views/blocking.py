"""Block, unblock, mute and unmute (webapp/blocks.py): forms on a user's page, each a POST that
comes back to that page with what it did."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from webapp.views.errors import ShownBadRequest
from webapp.views.pages import account_or_404, signed_in


@require_POST
@signed_in
def block(request: HttpRequest, username: str, undo: bool = False) -> HttpResponse:
    """Blocking takes the follows away both ways; neither sees the other's tweets after it."""
    me, social = request.causal.account, request.causal.social
    user = account_or_404(request, username)
    if user.username == me.username:
        raise ShownBadRequest("You cannot block yourself.")
    social.block(me, user, undo=undo)
    if undo:
        messages.info(request, f"You no longer block @{user.username}.")
    else:
        messages.success(
            request, f"You block @{user.username}: neither of you follows or sees the other now."
        )
    return redirect("user", username=user.username)


@require_POST
@signed_in
def mute(request: HttpRequest, username: str, undo: bool = False) -> HttpResponse:
    """Muting hides someone from your lines and notices; they are not told."""
    me, social = request.causal.account, request.causal.social
    user = account_or_404(request, username)
    if user.username == me.username:
        raise ShownBadRequest("You cannot mute yourself.")
    social.mute(me, user.username, undo=undo)
    if undo:
        messages.info(request, f"You no longer mute @{user.username}.")
    else:
        messages.success(request, f"You mute @{user.username}: their tweets stay out of your lines.")
    return redirect("user", username=user.username)
