"""How a tweet's parts are shown: times (relative, exact on hover), text with @mentions and links
made safe, and the URLs a page repeats for every tweet (reversed once per name)."""

from __future__ import annotations

import re
import time
from collections.abc import Collection
from datetime import UTC, datetime
from functools import lru_cache

from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

# A link: http(s) only (never javascript: or data:), up to whitespace or a character that would
# end an attribute; trailing punctuation stays text. A mention: @ and a possible username, not
# inside a word or an e-mail address.
LINK = r"https?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]"
MENTION = r"(?<![\w@/])@(?P<name>[a-z0-9_]{2,30})\b"
# A hashtag: # and a letter or digit, then up to 49 word characters (any script); not after a
# word, another # or & (an HTML entity's "&#39;" is not a tag).
TAG = r"(?<![\w#&])#(?P<tag>[^\W_]\w{0,49})"
TOKENS = re.compile(rf"(?P<link>{LINK})|{MENTION}|{TAG}", re.IGNORECASE)


def exact_time(time_us: int) -> str:
    return datetime.fromtimestamp(time_us / 1e6, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(time_us: int, now_s: float | None = None) -> str:
    """How long ago, as Twitter writes it: "now", "42s", "5m", "3h", "6d", then the date."""
    elapsed = (now_s if now_s is not None else time.time()) - time_us / 1e6
    if elapsed < 5:
        return "now"
    if elapsed < 7 * 86400:
        units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
        unit, seconds = next((u, s) for u, s in units if elapsed >= s)
        return f"{int(elapsed // seconds)}{unit}"
    when = datetime.fromtimestamp(time_us / 1e6, tz=UTC)
    return when.strftime("%b %-d") if elapsed < 365 * 86400 else when.strftime("%b %-d, %Y")


def when(time_us: int) -> SafeString:
    """A <time> element: relative text, the exact UTC time on hover and in ``datetime``."""
    iso = datetime.fromtimestamp(time_us / 1e6, tz=UTC).isoformat(timespec="seconds")
    exact = exact_time(time_us)
    return format_html('<time datetime="{}" title="{}">{}</time>', iso, exact, relative(time_us))


def rich(body: str, unknown: Collection[str] = ()) -> SafeString:
    """A tweet's text as HTML: everything escaped, line breaks kept, http(s) links and @mentions
    made links (links open without a referrer and carry no ranking: ``nofollow ugc``), but for
    ``unknown`` names (nobody had them when it was posted: a link would be a 404)."""
    parts: list[str] = []
    last = 0
    for found in TOKENS.finditer(body):
        parts.append(escape(body[last : found.start()]))
        if found.group("link"):
            parts.append(format_html(
                '<a href="{}" rel="nofollow ugc noopener noreferrer" target="_blank">{}</a>',
                found.group("link"), found.group("link"),
            ))  # fmt: skip
        elif found.group("tag"):
            tag = found.group("tag")
            parts.append(format_html('<a class="tag" href="{}">#{}</a>', tag_url(tag.lower()), tag))
        else:
            name = found.group("name")
            if name.lower() in unknown:
                parts.append(format_html('<span class="mention unknown">@{}</span>', name))
            else:
                link = user_url(name.lower())
                parts.append(format_html('<a class="mention" href="{}">@{}</a>', link, name))
        last = found.end()
    parts.append(escape(body[last:]))
    return mark_safe("".join(parts).replace("\r\n", "\n").replace("\n", "<br>"))


@lru_cache(maxsize=4096)
def user_url(username: str) -> str:
    return reverse("user", args=[username])


@lru_cache(maxsize=4096)
def tag_url(tag: str) -> str:
    return reverse("tag", args=[tag])


def picture_url(username: str, version: str = "") -> str:
    """A user's picture: the uploaded one at its version (kept for good: a new one has a new
    URL), else the one drawn from the name."""
    return reverse("avatar-picture", args=[username, version]) if version else avatar_url(username)


@lru_cache(maxsize=4096)
def avatar_url(username: str) -> str:
    """A page shows 40 entries: URLs reversed once per name, not once per entry."""
    return reverse("avatar", args=[username])
