"""Live pages: how many tweets (or replies, or notices) arrived since the page was drawn, for the
"N new tweets" bar (webapp/static/webapp/chirp.js polls it), and the header's unread count.

One light read of the region's store per poll: the newest cells of the line, counted above the
page's newest id (a reply thread's, below its oldest unseen). A line the page could not show
(another user's home timeline) answers 403; bad input a 400, never a write.
"""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from causal_client import ReadSpec
from webapp import blocks
from webapp.forms import CURSOR
from webapp.notices import Notice
from webapp.social_core import USERNAME_PATTERN
from webapp.social_values import Entry, Hidden, NoSuchUser

LIVE_CAP = 20  # the bar says "20+ new tweets" beyond
LINE = re.compile(
    r"\A(home|public|notices|user/(?P<user>[a-z0-9_]{2,30})"
    r"|replies/(?P<group>[\w-]{1,64})/(?P<id>[0-9a-f]{22}))\Z"
)


def bad(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@require_GET
def live(request: HttpRequest) -> JsonResponse:
    """``?line=home|public|notices|user/<name>|replies/<group>/<tweet id>&since=<id>``:
    ``{"new": n, "unread": u}`` (n up to LIVE_CAP + 1; u None when nobody is signed in)."""
    line, since = request.GET.get("line", ""), request.GET.get("since", "")
    found = LINE.match(line)
    if not found:
        return bad("line must be home, public, notices, user/<name> or replies/<group>/<tweet id>")
    if since and not CURSOR.match(since):
        return bad("since must be an id (22 hexadecimal digits) or empty")
    causal = request.causal
    causal.keeps_session = False  # a poll must never rewrite the cookie a sign-in or -out just set
    me, social, ctx = causal.account, causal.social, causal.ctx
    if line in ("home", "notices") and me is None:
        return bad("sign in to follow this line", 403)
    if found["group"] and found["group"] not in ctx.topology.group_members:
        return bad("no such group")
    spec: ReadSpec
    if line == "home":
        spec = ReadSpec(me.home_group, f"timeline:{me.username}", limit=LIVE_CAP + 1)
    elif line == "notices":
        spec = ReadSpec(me.home_group, f"notices:{me.username}", limit=LIVE_CAP + 1)
    elif line == "public":
        spec = ReadSpec(ctx.accounts_group, "public", limit=LIVE_CAP + 1)
    elif found["user"]:
        if not USERNAME_PATTERN.match(found["user"]):
            return bad("not a username")
        try:
            user = social.account(found["user"])
        except NoSuchUser:
            return bad("no such user", 404)
        spec = ReadSpec(user.home_group, f"userline:{user.username}", limit=LIVE_CAP + 1)
    else:  # replies, oldest first: those after the newest one the page shows
        replies = f"replies:{found['id']}"
        spec = ReadSpec(found["group"], replies, limit=LIVE_CAP + 1, after=since or None, reverse=False)
    if not ctx.replicates(spec.group, social.session.region):
        return JsonResponse({"new": 0, "unread": causal.unread_count})  # not followed live from here
    if me is None:
        row = social.session.multi_read([spec])[0]
        new = sum(1 for cell in row if cell.column > since)
        return JsonResponse({"new": new, "unread": causal.unread_count})
    row, hidden_row = social.session.multi_read([spec, blocks.hidden_spec(ctx.accounts_group, me.username)])
    hidden = blocks.hidden_of(hidden_row)
    new = sum(
        1 for cell in row if cell.column > since and not shows_hidden(line, cell.column, cell.text, hidden)
    )
    return JsonResponse({"new": new, "unread": causal.unread_count})


def shows_hidden(line: str, column: str, text: str, hidden: Hidden) -> bool:
    """Whether a line's cell (an entry, or on ``notices`` a notice) is of someone the reader does
    not see: the bar never counts what the page would leave out."""
    if not hidden.everyone:
        return False
    try:
        if line == "notices":
            return hidden.hides_name(Notice.from_json(column, text).actor)
        return hidden.hides(Entry.from_json(column, text))
    except (ValueError, KeyError, TypeError):  # not an entry (a line's bookkeeping cell): counted as before
        return False
