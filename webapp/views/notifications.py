"""The notifications page and the header's unread count (webapp/notices.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp import notices, profiles
from webapp.views.pages import cursor, signed_in


@require_GET
@signed_in
def page(request: HttpRequest) -> HttpResponse:
    """Your notices, newest first; the first page marks them read (as Twitter's does). Notices
    about a tweet deleted since, for a like or repost undone since (or repeated: like, unlike, like
    again), and from people you block, who block you or whom you mute, are left out."""
    me, social = request.causal.account, request.causal.social
    social.go_where_replicated(me.home_group)
    after = cursor(request)
    inbox = notices.inbox(social.session, me.username, me.home_group, after=after)
    asked = {n.tweet_id for n in inbox.notices if n.tweet_id}
    asked |= {profiles.account_tombstone(n.actor) for n in inbox.notices}  # from accounts deleted since
    gone = social.deleted_among(asked)
    here = request.causal.ctx.replicates
    gone |= notices.withdrawn(social.session, inbox.notices, lambda group: here(group, social.session.region))
    hidden = social.hidden(me)
    shown = [
        n for n in inbox.notices
        if not {n.tweet_id, n.id, profiles.account_tombstone(n.actor)} & gone
        and not hidden.hides_name(n.actor)
    ]  # fmt: skip
    if after is None and inbox.notices and inbox.notices[0].id > inbox.seen:
        notices.mark_seen(social.session, me.username, me.home_group, inbox.notices[0].id)
        request.causal.unread_count = 0
    return render(request, "notifications.html", {
        "me": me, "notices": shown, "next_cursor": inbox.next_cursor, "seen": inbox.seen,
        "newest": inbox.notices[0].id if inbox.notices else "",
    })  # fmt: skip
