"""Likes, reposts, pins, and the generated avatars."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.views.decorators.http import require_GET, require_POST

from webapp import pins, tasks
from webapp.avatars import avatar_svg
from webapp.social import USERNAME_PATTERN
from webapp.views import errors
from webapp.views.account import next_url
from webapp.views.pages import signed_in, tweet_or_404


@require_POST
@signed_in
def like(request: HttpRequest, group: str, tweet_id: str, undo: bool = False) -> HttpResponse:
    entry = tweet_or_404(request, group, tweet_id)
    request.causal.social.like(request.causal.account, entry, undo=undo)
    return HttpResponseRedirect(next_url(request))  # back to the page it was on


@require_POST
@signed_in
def repost(request: HttpRequest, group: str, tweet_id: str) -> HttpResponse:
    entry = tweet_or_404(request, group, tweet_id)
    shared = request.causal.social.repost(request.causal.account, entry)
    if shared is None:
        messages.info(request, "You reposted that already.")
    else:
        me = request.causal.account
        tasks.nudge(request.causal.session.region, me.home_group, shared.id)  # where its outbox cell is
        messages.success(request, f"Reposted @{entry.author}'s tweet to your followers.")
    return HttpResponseRedirect(next_url(request))


@require_POST
@signed_in
def pin(request: HttpRequest, group: str, tweet_id: str, undo: bool = False) -> HttpResponse:
    """Pins one of your own tweets to your profile, or unpins it (a red operation: webapp/pins.py)."""
    entry = tweet_or_404(request, group, tweet_id)
    me = request.causal.account
    if entry.author != me.username or entry.reposted_by:
        return errors.page(request, 403, "Not yours", "You can pin only your own tweets.")
    tweet = pins.Pinned(entry.group, entry.tweet_id)
    request.causal.social.go_where_replicated(me.home_group)  # where the pins' blue copy is written
    session = request.causal.session
    if undo:
        pins.unpin(session, me.username, me.home_group, tweet)
        messages.success(request, "Unpinned.")
    else:
        try:
            changed = pins.pin(session, me.username, me.home_group, tweet)
        except pins.PinLimit:
            messages.error(request, f"You can pin at most {pins.PIN_LIMIT} tweets. Unpin one first.")
            return HttpResponseRedirect(next_url(request))
        messages.success(request, "Pinned to your profile." if changed else "That tweet is pinned already.")
    return HttpResponseRedirect(next_url(request))


@require_GET
def avatar(request: HttpRequest, username: str) -> HttpResponse:
    """Anybody's avatar (a pure function of the name: no store call, cached a day)."""
    if not USERNAME_PATTERN.match(username):
        raise Http404("no such avatar")
    reply = HttpResponse(avatar_svg(username), content_type="image/svg+xml")
    reply["Cache-Control"] = "public, max-age=86400"
    return reply
