"""A browser for the web tier over real HTTP (stdlib urllib): one cookie jar for every region's
web app, CSRF tokens and Referers as pages send them, redirects followed by hand; and what a page
shows. Used against launched topologies and against containers (anything with a topology)."""

from __future__ import annotations

import html
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.cookiejar import CookieJar

from causal_client import tls
from helpers.deadlines import scaled, wait_for

PASSWORD = "pw-12345678"
HTTP_TIMEOUT_S = 60.0  # an attach may wait (saturn) on a loaded machine (scaled)
ANOMALY = 'data-anomaly="missing-original"'  # a reply shown before its original


# -- a browser: cookies, CSRF, redirects by hand ----------------------------------------------------
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx reaches the caller, who follows it (or not) explicitly


@dataclass
class Reply:
    status: int
    url: str
    headers: dict[str, str]
    text: str

    @property
    def location(self) -> str:
        return urllib.parse.urljoin(self.url, self.headers.get("location", ""))


class Browser:
    """One simulated browser: one cookie jar for every region's web app."""

    def __init__(self, deployment: object, user_agent: str | None = None):
        self.topology = getattr(deployment, "topology", deployment)  # a Cluster, or a Topology
        self.user_agent = user_agent or f"test-browser/{secrets.token_hex(4)}"  # hand-offs are bound to it
        self.jar = CookieJar()
        handlers: list[urllib.request.BaseHandler] = [
            urllib.request.HTTPCookieProcessor(self.jar),
            _NoRedirect(),
        ]
        if (context := tls.process_context(server=False)) is not None:  # https: the deployment's CA
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self.opener = urllib.request.build_opener(*handlers)

    def url(self, region: str, path: str) -> str:
        return self.topology.web_url(region) + path

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.jar if c.name == name), None)

    def open(
        self,
        url: str,
        data: dict[str, str] | None = None,
        referer: str | None = None,
        origin: str | None = None,
    ) -> Reply:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        request = urllib.request.Request(url, data=body, headers={"User-Agent": self.user_agent})
        if referer:
            request.add_header("Referer", referer)
        if origin:
            request.add_header("Origin", origin)
        try:
            with self.opener.open(request, timeout=scaled(HTTP_TIMEOUT_S)) as response:
                status, headers, raw = response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:  # 3xx (not followed), 4xx, 5xx: a page all the same
            status, headers, raw = exc.code, exc.headers, exc.read()
        return Reply(status, url, {k.lower(): v for k, v in headers.items()}, raw.decode("utf-8", "replace"))

    def get(self, region: str, path: str) -> Reply:
        return self.open(self.url(region, path))

    def post(self, region: str, path: str, fields: dict[str, str]) -> Reply:
        """A form POST as the page would send it: the CSRF token (from a page seen before) and a
        Referer from the same origin."""
        token = self.cookie(f"csrftoken_{region}")
        if token is None:
            self.get(region, "/")  # every page has a form (travel), so it sets the CSRF cookie
            token = self.cookie(f"csrftoken_{region}")
        assert token, f"no csrftoken_{region} cookie after a page at {region}"
        fields = {**fields, "csrfmiddlewaretoken": token}
        return self.open(self.url(region, path), fields, referer=self.url(region, "/"))

    def depart(self, here: str, destination: str) -> Reply:
        """The travel form's POST: the page that carries the hand-off (200), or a refusal."""
        return self.post(here, "/travel/", {"region": destination})

    def arrive(self, departure: Reply) -> Reply:
        """What the departure page's form does: POSTs the hand-off to the destination, with the
        departure page's Origin (no CSRF token: it is another region's page). Returns the
        arrival (a redirect home) or a refusal."""
        action, token = handoff_form(departure.text)
        scheme, netloc, *_ = urllib.parse.urlsplit(departure.url)
        origin = f"{scheme}://{netloc}"
        return self.open(action, {"t": token}, origin=origin)

    def travel(self, here: str, destination: str) -> Reply:
        departure = self.depart(here, destination)
        assert departure.status == 200, f"{here}->{destination}: {departure.status} {departure.text[:300]}"
        return self.arrive(departure)

    def follow(self, reply: Reply) -> Reply:
        assert reply.status in (301, 302, 303), f"expected a redirect from {reply.url}, got {reply.status}"
        return self.open(reply.location)

    # -- the app's actions ---------------------------------------------------------------------------
    def sign_up(self, region: str, username: str, password: str = PASSWORD) -> Reply:
        fields = {"username": username, "password": password, "password_again": password}
        return self.post(region, "/signup/", fields)

    def log_in(self, region: str, username: str, password: str = PASSWORD) -> Reply:
        return self.post(region, "/login/", {"username": username, "password": password})

    def tweet(self, region: str, body: str, reply_to: str = "") -> Reply:
        reply = self.post(region, "/post/", {"body": body, "reply_to": reply_to})
        assert reply.status == 302, f"posting at {region}: {reply.status} {reply.text[:300]}"
        return reply


_HANDOFF = re.compile(
    r'<form method="post" action="([^"]+)" id="handoff"[^>]*>\s*'
    r'<input type="hidden" name="t" value="([^"]+)">'
)


def handoff_form(page: str) -> tuple[str, str]:
    """The departure page's form: where it posts, and the hand-off it carries."""
    found = _HANDOFF.search(page)
    assert found, f"no hand-off form on the page: {page[:500]}"
    return html.unescape(found.group(1)), html.unescape(found.group(2))


def new_name(prefix: str = "u") -> str:
    return f"{prefix}{secrets.token_hex(6)}"


def poll(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05):
    """Waits for ``predicate`` (tests/helpers/deadlines.py: the deadline scaled to the machine)."""
    return wait_for(predicate, timeout, what, interval)


# -- reading pages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shown:
    """A tweet as a page shows it (an ``<article class="tweet">``)."""

    id: str
    group: str
    body: str
    is_reply: bool
    original: str | None  # the quoted original's text, if shown
    anomaly: bool  # the "reply seen before its tweet" marker

    @property
    def ref(self) -> str:
        return f"{self.group}/{self.id}"


_ARTICLE = re.compile(r'<article class="tweet" id="t-([0-9a-f]{22})">(.*?)</article>', re.S)
_BODY = re.compile(r'<p class="body">(.*?)</p>', re.S)
_QUOTE = re.compile(r"<q>(.*?)</q>", re.S)


def text_of(fragment: str) -> str:
    """A tweet body's text as typed: line breaks back, links and mentions as their text."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment.replace("<br>", "\n"))).strip()


def tweets_on(page: str) -> list[Shown]:
    shown = []
    for tweet_id, inner in _ARTICLE.findall(page):
        group = re.search(r'href="/t/([^/"]+)/[0-9a-f]{22}/"', inner)  # a repost's: its original
        body = _BODY.search(inner)
        quote = _QUOTE.search(inner)
        assert group and body, f"unexpected tweet markup: {inner[:300]}"
        shown.append(Shown(
            tweet_id, group.group(1), text_of(body.group(1)), 'class="reply-to"' in inner,
            html.unescape(quote.group(1)) if quote else None, ANOMALY in inner,
        ))  # fmt: skip
    return shown


def find(page: str, body: str) -> Shown | None:
    return next((t for t in tweets_on(page) if t.body == body), None)
