"""Travelling to another region's web app with one's session (paper §4.3's migration).

The region left makes a migration label (above everything the session has seen) and a signed,
short-lived, single-use hand-off naming the user, the label and the destination. The destination
attaches with the label, which returns only once the migration label has reached it through
Saturn's tree, that is, once everything the user had seen is visible there: nothing seen
disappears, not even an instant after arriving.
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


def use_once(broker_url: str, nonce: str) -> None:
    """A hand-off works once: its nonce is claimed in this region's broker Redis."""
    client = redis.Redis.from_url(broker_url, socket_timeout=5)
    try:
        if not client.set(f"webapp:handoff:{nonce}", 1, nx=True, ex=NONCE_TTL_S):
            raise BadHandoff("This travel link was already used.")
    finally:
        client.close()


def arrive(causal: CausalRequest, token: str) -> Handoff:
    """Checks the hand-off and attaches here with its label (waiting until it is stable)."""
    ctx = causal.ctx
    handoff = read_handoff(token, ctx.region)
    use_once(ctx.topology.broker_url(ctx.region), handoff.nonce)
    causal._session = ctx.client.session(ctx.region, label=handoff.label)
    note = f"travelled from {handoff.origin} (migration label)"
    if handoff.username:
        causal.sign_in(handoff.username, label=causal._session.label, note=note)
    else:
        causal.remember(note)
    return handoff
