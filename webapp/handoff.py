"""Travelling to another region's web app with one's session (paper §4.3's migration).

The region left makes a migration label (above everything the session has seen) and a signed,
short-lived (30 s), single-use hand-off naming the user, the label, the destination and the
session family (signing out anywhere ends the family everywhere). The hand-off is never a URL:
the page the region left answers with a form that the browser POSTs to the destination at once,
so the token is in no address bar, history, access log or Referer. The arrival takes it only
from one of the deployment's own pages (the request's ``Origin`` is a region's web origin: a
stranger's page cannot push its own hand-off at a victim, which would sign the victim into the
stranger's account), and only from the browser that asked for it (a hash of its address and
User-Agent, inside the signed token: a copy taken by someone else signs nobody in).
The destination attaches with the label, which returns only once the migration label has reached
it through Saturn's tree, that is, once everything the user had seen is visible there: nothing
seen disappears, not even an instant after arriving.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis
from django.conf import settings
from django.core import signing
from django.http import HttpRequest

from causal_client import Label, tls
from webapp.causal import CausalRequest
from webapp.context import RegionContext

SALT = "webapp.travel"
MAX_AGE_S = 30  # a hand-off is used within a second; the rest covers a slow network
NONCE_TTL_S = 20 * MAX_AGE_S  # outlives the token even with the regions' clocks 9 min apart


class BadHandoff(Exception):
    """Forged, expired, replayed or meant for another region; the message says which."""


ALREADY_USED = "This travel hand-off was already used; travel again from where you were."


class HandoffUnavailable(Exception):
    """The region cannot check a hand-off now (its broker, where nonces are kept, is down)."""


@dataclass(frozen=True)
class Handoff:
    username: str | None
    label: Label
    origin: str
    destination: str
    nonce: str
    family: str | None = None
    signed_in_us: int = 0  # when the session signed in (a password change signs out those before)


@dataclass(frozen=True)
class Departure:
    """Where the browser POSTs the hand-off, and the hand-off (a form field, never a URL)."""

    url: str
    token: str


def browser_of(request: HttpRequest) -> str:
    """What binds a hand-off to the browser that asked for it: its address and User-Agent, as
    every region sees them alike (hashed: the token carries no address)."""
    seen = f"{request.META.get('REMOTE_ADDR', '')}|{request.META.get('HTTP_USER_AGENT', '')}"
    return hashlib.sha256(seen.encode()).hexdigest()[:24]


def leave(causal: CausalRequest, destination: str) -> Departure:
    """The hand-off that resumes this session at ``destination``, for this browser only."""
    migration = causal.session.prepare_migration(destination)
    token = signing.dumps(
        {"u": causal.username, "l": migration.to_token(), "from": causal.ctx.region,
         "to": destination, "n": secrets.token_urlsafe(12), "b": browser_of(causal.request),
         "f": causal.family, "s": causal.signed_in_us},
        salt=SALT, compress=True,
    )  # fmt: skip
    return Departure(f"{causal.ctx.web_url(destination)}/arrive/", token)


def read_handoff(token: str, here: str, browser: str) -> Handoff:
    """The hand-off, if it is genuine, fresh, for this region and from this browser."""
    try:
        data = signing.loads(token, salt=SALT, max_age=MAX_AGE_S)
    except signing.SignatureExpired:
        raise BadHandoff("This travel hand-off has expired; travel again from where you were.") from None
    except signing.BadSignature:
        raise BadHandoff("This travel hand-off is not valid.") from None
    try:
        handoff = Handoff(
            data["u"],
            Label.from_token(data["l"]),
            data["from"],
            data["to"],
            data["n"],
            data.get("f"),
            int(data.get("s") or 0),
        )
        bound_to = data["b"]
    except Exception:
        raise BadHandoff("This travel hand-off is not valid.") from None
    if handoff.destination != here:
        raise BadHandoff(f"This travel hand-off is for {handoff.destination}, not {here}.")
    if not secrets.compare_digest(bound_to, browser):
        raise BadHandoff("This travel hand-off was made for another browser; travel from where you were.")
    return handoff


class Nonces:
    """Single use: a hand-off's nonce is claimed in this region's broker Redis, and given back
    if the arrival fails on our side (so that the traveller can try again)."""

    def __init__(self, broker_url: str):
        self.broker_url = broker_url

    def _call(self, command: str, *args: object):
        client = redis.Redis.from_url(
            self.broker_url,
            socket_timeout=5,
            socket_connect_timeout=5,
            **tls.redis_url_options(self.broker_url),
        )
        try:
            return client.execute_command(command, *args)
        except redis.RedisError as exc:
            raise HandoffUnavailable(f"travel is unavailable here right now ({exc})") from None
        finally:
            client.close()

    @staticmethod
    def _key(nonce: str) -> str:
        return f"webapp:handoff:{nonce}"

    def claim(self, nonce: str) -> None:
        if not self._call("SET", self._key(nonce), 1, "NX", "EX", NONCE_TTL_S):
            raise BadHandoff(ALREADY_USED)

    def give_back(self, nonce: str) -> None:
        self._call("DEL", self._key(nonce))


def web_origins(ctx: RegionContext) -> set[str]:
    """The origins of the deployment's pages: every region's web URL, and each region's port on
    every host name this app answers to (a browser may have come in as localhost)."""
    urls = {ctx.web_url(region) for region in ctx.regions}
    hosts = {h for h in settings.ALLOWED_HOSTS if h and not h.startswith((".", "*"))}
    ports = {urlsplit(url).port for url in urls}
    return {url.rstrip("/") for url in urls} | {
        f"{scheme}://{host}:{port}" for scheme in ("http", "https") for host in hosts for port in ports
    }


def from_our_pages(request: HttpRequest, origins: set[str]) -> bool:
    """Whether the request was sent by a page of one of ``origins`` (browsers send ``Origin``
    with every cross-origin POST; a request without one did not come from our page)."""
    return request.META.get("HTTP_ORIGIN", "") in origins


def arrive(causal: CausalRequest, token: str) -> Handoff:
    """Checks the hand-off and attaches here with its label (waiting until it is stable)."""
    ctx = causal.ctx
    if not from_our_pages(causal.request, web_origins(ctx)):
        raise BadHandoff("A travel hand-off is taken only from this deployment's own pages.")
    handoff = read_handoff(token, ctx.region, browser_of(causal.request))
    nonces = Nonces(ctx.topology.broker_url(ctx.region))
    nonces.claim(handoff.nonce)
    try:
        causal.resume(handoff.label)
    except Exception:
        nonces.give_back(handoff.nonce)
        raise
    note = f"travelled from {handoff.origin} (migration label)"
    if handoff.username:
        causal.sign_in(handoff.username, note=note, family=handoff.family, signed_in_us=handoff.signed_in_us)
    else:
        causal.remember(note)
    return handoff
