"""Shared by the in-process web tests: users signed up through the views, pages read back."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.test import Client

from helpers.waiting import eventually, unique
from webapp.context import current
from webapp.social import Social

PASSWORD = "pw-123456"


def username(prefix: str = "u") -> str:
    """A fresh valid username (unique within the module's cluster)."""
    name = re.sub(r"[^a-z0-9_]", "_", unique(prefix).lower())[-30:]
    assert re.fullmatch(r"[a-z0-9_]{2,30}", name)
    return name


def sign_up(client: Client, name: str, password: str = PASSWORD) -> None:
    reply = client.post("/signup/", {"username": name, "password": password, "password_again": password})
    assert reply.status_code == 302, reply.content[:800]
    assert reply["Location"] == "/"


def new_user(prefix: str = "u") -> tuple[Client, str]:
    """A new client, signed up and signed in as a new user."""
    client = Client()
    name = username(prefix)
    sign_up(client, name)
    return client, name


def html(reply) -> str:
    return reply.content.decode()


def bodies(page: str) -> list[str]:
    """The tweet bodies a page shows, in order (as rendered: escaped)."""
    return re.findall(r'<p class="body">(.*?)</p>', page, flags=re.S)


def articles(page: str) -> int:
    return page.count('<article class="tweet"')


def counts(page: str) -> dict[str, int]:
    """A user page's tweets / followers / following numbers."""
    found = {
        what: re.search(rf"<strong>(\d+)</strong> {word}", page)
        for what, word in (("tweets", "tweets?"), ("followers", "followers?"), ("following", "following"))
    }
    assert all(found.values()), page[:2000]
    return {what: int(m.group(1)) for what, m in found.items()}


def older_link(page: str) -> str | None:
    """The cursor of the "Older tweets" link, if the page has one."""
    m = re.search(r'<a rel="next" href="\?after=([^"]*)">Older tweets', page)
    return m.group(1) if m else None


def tweet_refs(page: str) -> list[tuple[str, str]]:
    """(group, tweet id) of each tweet's permalink on a page, in order."""
    return re.findall(r'<a class="time" href="/t/([a-z0-9_-]+)/([0-9a-f]{22})/">', page)


def first_tweet_path(page: str) -> str:
    """The permalink of the first tweet a page shows."""
    found = re.search(r'<a class="time" href="(/t/[^"]+/)"', page)
    assert found, page[:800]
    return found.group(1)


def home_shows(client: Client, body: str, present: bool = True, timeout: float = 30) -> None:
    """Waits until ``client``'s home timeline shows a tweet of ``body`` (``present`` False: until
    it no longer does)."""
    eventually(
        lambda: (body in bodies(html(client.get("/")))) == present or None, timeout=timeout, interval=0.3
    )


@dataclass
class RepostScene:
    """An author's tweet (``path``, its page), a reposter and a follower of the reposter."""

    author: Client
    author_name: str
    reposter: Client
    reposter_name: str
    follower: Client
    path: str


def repost_scene(prefix: str, body: str) -> RepostScene:
    """Three new users: the author posts ``body``; the follower follows the reposter (who has not
    reposted yet)."""
    author, author_name = new_user(prefix)
    reposter, reposter_name = new_user(prefix + "r")
    follower, _ = new_user(prefix + "f")
    assert follower.post(f"/u/{reposter_name}/follow/").status_code == 302
    assert author.post("/post/", {"body": body}).status_code == 302
    return RepostScene(
        author, author_name, reposter, reposter_name, follower, first_tweet_path(html(author.get("/")))
    )


def data_layer() -> Social:
    """The app's data layer on a fresh session at the region Django serves."""
    ctx = current()
    return Social(ctx, ctx.client.session(ctx.region))
