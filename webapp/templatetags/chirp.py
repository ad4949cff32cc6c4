"""Template helpers: tweet times (relative, exact on hover), tweet bodies with @mentions and
links made safe, and dictionary lookups."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from django import template
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# A link: http(s) only (never javascript: or data:), up to whitespace or a character that would
# end an attribute; trailing punctuation stays text. A mention: @ and a possible username, not
# inside a word or an e-mail address.
LINK = r"https?://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]"
MENTION = r"(?<![\w@/])@(?P<name>[a-z0-9_]{2,30})\b"
TOKENS = re.compile(rf"(?P<link>{LINK})|{MENTION}", re.IGNORECASE)


def exact_time(time_us: int) -> str:
    return datetime.fromtimestamp(time_us / 1e6, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def tweet_time(time_us: int) -> str:
    """µs since the epoch as a short UTC time."""
    return exact_time(time_us)


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


@register.filter
def when(time_us: int) -> SafeString:
    """A <time> element: relative text, the exact UTC time on hover and in ``datetime``."""
    iso = datetime.fromtimestamp(time_us / 1e6, tz=UTC).isoformat(timespec="seconds")
    exact = exact_time(time_us)
    return format_html('<time datetime="{}" title="{}">{}</time>', iso, exact, relative(time_us))


@register.filter
def rich(body: str) -> SafeString:
    """A tweet's text as HTML: everything escaped, line breaks kept, http(s) links and @mentions
    made links (links open without a referrer and carry no ranking: ``nofollow ugc``)."""
    parts: list[str] = []
    last = 0
    for found in TOKENS.finditer(body):
        parts.append(escape(body[last : found.start()]))
        if found.group("link"):
            parts.append(format_html(
                '<a href="{}" rel="nofollow ugc noopener noreferrer" target="_blank">{}</a>',
                found.group("link"), found.group("link"),
            ))  # fmt: skip
        else:
            name = found.group("name")
            href = reverse("user", args=[name.lower()])
            parts.append(format_html('<a class="mention" href="{}">@{}</a>', href, name))
        last = found.end()
    parts.append(escape(body[last:]))
    return mark_safe("".join(parts).replace("\r\n", "\n").replace("\n", "<br>"))


@register.filter
def lookup(mapping: dict | None, key: str):
    return (mapping or {}).get(key)


@register.filter
def arrow(pair: str) -> str:
    """"origin>region" as "origin → region"."""
    return pair.replace(">", " → ")
