"""Template tags and filters: tweets (``{% entry %}``, webapp/entry_html.py), their times and
text (webapp/formatting.py), dictionary lookups."""

from __future__ import annotations

from dataclasses import replace

from django import template
from django.utils.safestring import SafeString

from webapp import formatting
from webapp.entry_html import Reader, entry_html
from webapp.social_values import tweet_time_us

register = template.Library()

register.filter("when", formatting.when)
register.filter("rich", formatting.rich)
register.filter("avatar_url", formatting.avatar_url)
register.simple_tag(formatting.picture_url, name="picture_url")


@register.filter
def notice_time(notice_id: str) -> SafeString:
    """When a notice's action happened (its id is a time, as a tweet id is)."""
    return formatting.when(tweet_time_us(notice_id))


@register.filter
def lookup(mapping: dict | None, key: str):
    return (mapping or {}).get(key)


@register.filter
def arrow(pair: str) -> str:
    """ "origin>region" as "origin → region"."""
    return pair.replace(">", " → ")


@register.simple_tag(takes_context=True)
def entry(context: template.Context, shown) -> SafeString:
    """One tweet of a line or of its own page, as webapp/entry_html.py writes it."""
    original = (context.get("originals") or {}).get(shown.reply_to) if shown.reply_to else None
    parent_gone = bool(shown.reply_to) and shown.reply_to in (context.get("gone") or ())
    reaction = (context.get("reactions") or {}).get(shown.tweet_id)
    seen_by = reader(context)
    if context.get("on_tweet_page"):  # the page's own tweet; not the replies drawn after it
        seen_by = replace(seen_by, on_tweet_page=True)
    author = (context.get("authors") or {}).get(shown.author)
    return entry_html(shown, original, reaction, seen_by, parent_gone=parent_gone, author=author)


def reader(context: template.Context) -> Reader:
    """The page's reader, made once per render (a line draws 40 tweets with it): nothing in it
    may depend on the entry drawn first (``on_tweet_page`` is set per entry, by ``entry``)."""
    made = context.render_context.get("chirp_reader")
    if made is None:
        made = context.render_context["chirp_reader"] = Reader(
            signed_in=bool(context.get("me")),
            username=getattr(context.get("me"), "username", None),
            region=context.get("region", ""),
            region_groups=frozenset(context.get("region_groups") or ()),
            here=context.get("here", "/"),
            csrf_input=str(context.get("csrf_input", "")),
        )
    return made
