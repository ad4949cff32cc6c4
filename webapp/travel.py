"""Travelling to another region's web app with one's session (paper §4.3's migration).

The region left makes a migration label (above everything the session has seen) and a signed,
short-lived, single-use hand-off naming the user, the label and the destination. The destination
shows who is arriving and asks for a click (a POST with its CSRF token: a link alone must not
sign anybody into an account, or a stranger's hand-off link would sign its visitor into the
stranger's account); then it attaches with the label, which returns only once the migration
label has reached it through Saturn's tree, that is, once everything the user had seen is
visible there: nothing seen disappears, not even an instant after arriving.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import redis
from django.core import signing

from causal_client import Label
from webapp.causal import CausalRequest

SALT = "webapp.travel"
MAX_AGE_S = 120
NONCE_TTL_S = 2 * MAX_AGE_S


class BadHandoff(Exception):
    """Forged, expired, replayed or meant for another region; the message says which."""


ALREADY_USED = "This travel link was already used."


class HandoffUnavailable(Exception):
    """The region cannot check a hand-off now (its broker, where nonces are kept, is down)."""


@dataclass(frozen=True)
class Handoff:
    username: str | None
    label: Label
    origin: str
    destination: str
    nonce: str


def leave(causal: CausalRequest, destination: str) -> str:
    """The URL at ``destination`` that resumes this session there."""
    migration = causal.session.prepare_migration(destination)
    token = signing.dumps(
        {"u": causal.username, "l": migration.to_token(), "from": causal.ctx.region,
         "to": destination, "n": secrets.token_urlsafe(12)},
        salt=SALT, compress=True,
    )  # fmt: skip
    return f"{causal.ctx.web_url(destination)}/arrive/?t={token}"


def read_handoff(token: str, here: str) -> Handoff:
    try:
        data = signing.loads(token, salt=SALT, max_age=MAX_AGE_S)
    except signing.SignatureExpired:
        raise BadHandoff("This travel link has expired; travel again from where you were.") from None
    except signing.BadSignature:
        raise BadHandoff("This travel link is not valid.") from None
    try:
        handoff = Handoff(data["u"], Label.from_token(data["l"]), data["from"], data["to"], data["n"])
    except Exception:
        raise BadHandoff("This travel link is not valid.") from None
    if handoff.destination != here:
        raise BadHandoff(f"This travel link is for {handoff.destination}, not {here}.")
    return handoff


class Nonces:
    """Single use: a hand-off's nonce is claimed in this region's broker Redis, and given back
    if the arrival fails on our side (so that the traveller can try again)."""

    def __init__(self, broker_url: str):
        self.broker_url = broker_url

    def _call(self, command: str, *args: object):
        client = redis.Redis.from_url(self.broker_url, socket_timeout=5, socket_connect_timeout=5)
        try:
            return client.execute_command(command, *args)
        except redis.RedisError as exc:
            raise HandoffUnavailable(f"travel is unavailable here right now ({exc})") from None
        finally:
            client.close()

    @staticmethod
    def _key(nonce: str) -> str:
        return f"webapp:handoff:{nonce}"

    def used(self, nonce: str) -> bool:
        return bool(self._call("EXISTS", self._key(nonce)))

    def claim(self, nonce: str) -> None:
        if not self._call("SET", self._key(nonce), 1, "NX", "EX", NONCE_TTL_S):
            raise BadHandoff(ALREADY_USED)

    def give_back(self, nonce: str) -> None:
        self._call("DEL", self._key(nonce))


def check(causal: CausalRequest, token: str) -> Handoff:
    """The hand-off a token carries, if it can still be used here (without using it)."""
    handoff = read_handoff(token, causal.ctx.region)
    if Nonces(causal.ctx.topology.broker_url(causal.ctx.region)).used(handoff.nonce):
        raise BadHandoff(ALREADY_USED)
    return handoff


def arrive(causal: CausalRequest, token: str) -> Handoff:
    """Checks the hand-off and attaches here with its label (waiting until it is stable)."""
    ctx = causal.ctx
    handoff = read_handoff(token, ctx.region)
    nonces = Nonces(ctx.topology.broker_url(ctx.region))
    nonces.claim(handoff.nonce)
    try:
        causal._session = ctx.client.session(ctx.region, label=handoff.label)
    except Exception:
        nonces.give_back(handoff.nonce)
        raise
    note = f"travelled from {handoff.origin} (migration label)"
    if handoff.username:
        causal.sign_in(handoff.username, note=note)
    else:
        causal.remember(note)
    return handoff
