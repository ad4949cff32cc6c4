"""One tweet as HTML, in Python: a page shows 40 of them, and the same markup through Django's
template engine cost about 0.1 ms each (some thirty variable lookups and tags per tweet), the
largest part of a timeline page's CPU. The markup is the one `_line.html` and `tweet.html`
include (`{% entry entry %}`); every value goes through ``format_html`` (escaped)."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from webapp.formatting import picture_url, rich, user_url, when
from webapp.social_values import Author, Entry, Reactions

MISSING = "that tweet is not visible in {} (a reply seen before its tweet)"


@dataclass(frozen=True)
class Reader:
    """What an entry's rendering needs of its page: who reads, where, and the page's forms."""

    signed_in: bool
    username: str | None  # the reader's (their own tweets get a Delete button)
    region: str
    region_groups: frozenset[str]
    here: str  # the page's path: like and repost come back to it
    csrf_input: str
    on_tweet_page: bool = False


def tweet_url(entry: Entry) -> str:
    return reverse("tweet", args=[entry.group, entry.tweet_id])


def reply_part(entry: Entry, original: Entry | None, reader: Reader, parent_gone: bool = False) -> SafeString:
    if not entry.reply_to:
        return mark_safe("")
    if parent_gone:
        shown = mark_safe('<span class="muted">(a deleted tweet)</span>')
    elif original is not None:
        shown = format_html(
            "<q>{}</q>", original.body if len(original.body) <= 80 else original.body[:79] + "…"
        )
    elif entry.reply_group and entry.reply_group in reader.region_groups:
        shown = format_html(
            '<span class="missing" data-anomaly="missing-original">' + MISSING + "</span>", reader.region
        )
    else:
        shown = mark_safe('<span class="muted">(a tweet stored in other regions)</span>')
    return format_html(
        '<p class="reply-to">↪ in reply to <a href="{}">@{}</a>:\n      {}</p>',
        user_url(entry.reply_author or ""), entry.reply_author, shown,
    )  # fmt: skip


def form(action: str, reader: Reader, back: str, button: SafeString) -> SafeString:
    """A one-button form that posts to ``action`` and comes back to ``back``."""
    return format_html(
        '<form method="post" action="{}" class="inline">{}'
        '<input type="hidden" name="next" value="{}">{}</form>',
        action, mark_safe(reader.csrf_input), back, button,
    )  # fmt: skip


def counter_button(kind: str, on: bool, pressed: str | None, title: str, sign: str, count: int) -> SafeString:
    """The like or repost button: its count, lit when the reader did it. A screen reader hears
    its label ("Like, 3 likes"), not the sign and the number ("♥ 3")."""
    label = f"{title}, {count} {kind}{'' if count == 1 else 's'}"
    return format_html(
        '<button type="submit" class="{}{}"{} title="{}" aria-label="{}">'
        '{} <span class="count">{}</span></button>',
        kind, " on" if on else "", format_html(' aria-pressed="{}"', pressed) if pressed else "",
        title, label, sign, count,
    )  # fmt: skip


def actions(entry: Entry, reaction: Reactions | None, reader: Reader) -> SafeString:
    url = tweet_url(entry)
    parts = []
    if reader.signed_in and not reader.on_tweet_page:
        parts.append(format_html('<a class="reply-link" href="{}">Reply</a>', url))
    if reaction is not None:
        parts.append(format_html(
            '<a class="replies" href="{}#replies" title="replies">↩ <span class="count">{}</span></a>',
            url, reaction.replies,
        ))  # fmt: skip
    if reaction is not None and reader.signed_in:
        back = f"{reader.here}#t-{entry.id}"
        liked, reposted = reaction.liked, reaction.reposted
        like = counter_button(
            "like", liked, "true" if liked else "false", "Unlike" if liked else "Like", "♥", reaction.likes
        )
        repost = counter_button(
            "repost", reposted, "true" if reposted else "false", "Undo repost" if reposted else "Repost", "⟲",
            reaction.reposts,
        )  # fmt: skip
        parts.append(form(url + ("unlike/" if liked else "like/"), reader, back, like))
        parts.append(form(url + ("unrepost/" if reposted else "repost/"), reader, back, repost))
    elif reaction is not None:
        parts.append(format_html(
            '<span class="like" title="likes">♥ <span class="count">{}</span></span>\n'
            '<span class="repost" title="reposts">⟲ <span class="count">{}</span></span>',
            reaction.likes, reaction.reposts,
        ))  # fmt: skip
    if reader.username == entry.author and not entry.reposted_by:
        delete = mark_safe(
            '<button type="submit" class="delete link" title="Delete this tweet everywhere" data-confirm='
            '"Delete this tweet? It disappears from every timeline, in every region.">Delete</button>'
        )
        parts.append(form(url + "delete/", reader, reader.here if not reader.on_tweet_page else "/", delete))
    return format_html_join("\n    ", "{}", ((part,) for part in parts))


def display_name(author: Author | None) -> SafeString | str:
    """The author's display name before the @name, where one was set."""
    if author is None or not author.display:
        return ""
    return format_html('<span class="display-name">{}</span> ', author.display)


def entry_html(
    entry: Entry, original: Entry | None, reaction: Reactions | None, reader: Reader,
    parent_gone: bool = False, author: Author | None = None,
) -> SafeString:  # fmt: skip
    reposted = ""
    if entry.reposted_by:
        by, others = entry.reposted_by, entry.also_reposted_by
        more = ""
        if len(others) == 1:
            more = format_html(' and <a href="{}">@{}</a>', user_url(others[0]), others[0])
        elif others:
            more = format_html(" and {} others", len(others))
        reposted = format_html(
            '<p class="reposted">⟲ <a href="{}">@{}</a>{} reposted</p>', user_url(by), by, more
        )
    return format_html(
        '<article class="tweet" id="t-{}">\n  {}\n'
        '  <img class="avatar" src="{}" alt="" width="40" height="40">\n'
        '  <div class="tweet-main">\n'
        '  <header>{}<a class="author" href="{}">@{}</a>\n'
        '    <a class="time" href="{}">{}</a></header>\n'
        "  {}\n"
        '  <p class="body">{}</p>\n'
        '  <footer class="actions">\n    {}\n  </footer>\n'
        "  </div>\n</article>\n",
        entry.id, reposted, picture_url(entry.author, author.avatar if author else ""),
        display_name(author),
        user_url(entry.author), entry.author,
        tweet_url(entry), when(entry.time_us), reply_part(entry, original, reader, parent_gone),
        rich(entry.body, entry.unknown_mentions),
        actions(entry, reaction, reader),
    )  # fmt: skip
