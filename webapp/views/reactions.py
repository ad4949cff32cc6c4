"""Likes, reposts, deletes, pins, and the generated avatars. The outbox cells they write (a
repost's fan-out, a notice) are nudged once the response is ready (webapp/causal.py)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from webapp import pins
from webapp.avatars import avatar_svg
from webapp.social_core import USERNAME_PATTERN
from webapp.views import errors
from webapp.views.account import next_url
from webapp.views.pages import check_tweet_ref, signed_in, tweet_or_404


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
        messages.success(request, f"Reposted @{entry.author}'s tweet to your followers.")
    return HttpResponseRedirect(next_url(request))


@require_POST
@signed_in
def unrepost(request: HttpRequest, group: str, tweet_id: str) -> HttpResponse:
    entry = tweet_or_404(request, group, tweet_id)
    if request.causal.social.unrepost(request.causal.account, entry):
        messages.success(request, "Repost undone: it leaves your followers' timelines.")
    else:
        messages.info(request, "You had not reposted that.")
    return HttpResponseRedirect(next_url(request))


@require_POST
@signed_in
def delete(request: HttpRequest, group: str, tweet_id: str) -> HttpResponse:
    """Deletes one of your own tweets, everywhere (webapp/social.py: tombstones)."""
    me = request.causal.account
    check_tweet_ref(request, group, tweet_id)
    entry = request.causal.social.tweet(group, tweet_id)
    if entry is None:  # deleted already (a second click), or never here
        raise Http404("no such tweet")
    if entry.author != me.username or group != me.home_group:
        return errors.page(request, 403, "Not yours", "You can delete only your own tweets.")
    request.causal.social.delete(me, entry)
    messages.success(request, "Deleted. It disappears from every timeline, in every region.")
    back = next_url(request)
    return HttpResponseRedirect("/" if back.startswith(reverse("tweet", args=[group, tweet_id])) else back)


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
