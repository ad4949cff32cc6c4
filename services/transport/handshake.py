"""How a link connection starts, without any I/O: the server greets, the client proves that it
knows the deployment's secret, and only then does the server read a frame.

    server → client   MAGIC + a fresh 16-byte nonce                      (30 bytes)
    client → server   MAGIC + HMAC-SHA256(key, "link-client" + nonce)      (46 bytes)

The key is derived from ``$SATURN_SECRET`` (an empty secret on a loopback-only deployment gives
a key too, so the exchange is the same everywhere). A fresh nonce per connection means a proof
recorded on the wire is worth nothing on the next one. Like the gRPC bearer token it replaces
for these streams, it keeps strangers out; it does not encrypt: under the deployment's TLS it runs
inside the TLS connection (services/transport/server.py).

Bytes that do not start with MAGIC say what dialled, or what was dialled: a gRPC client sends
the HTTP/2 preface, a Redis client a RESP array, a browser an HTTP request (``guess_peer``).
"""

from __future__ import annotations

import hashlib
import hmac
import os

from causal_client.peers import LINK_MAGIC, guess_peer
from services.transport.errors import NotALinkPeer

MAGIC = LINK_MAGIC + b"1\n"
NONCE_BYTES = 16
PROOF_BYTES = 32
GREETING_BYTES = len(MAGIC) + NONCE_BYTES
ANSWER_BYTES = len(MAGIC) + PROOF_BYTES
_CONTEXT = b"link-client"


def link_key(secret: str | None) -> bytes:
    """The key link proofs are made with (not the secret itself: the same secret is also the
    stores' password, and a proof should never help to guess it)."""
    return hashlib.sha256(b"saturn link key\0" + (secret or "").encode()).digest()


def greeting() -> tuple[bytes, bytes]:
    """(what the server sends first, the nonce it must remember)."""
    nonce = os.urandom(NONCE_BYTES)
    return MAGIC + nonce, nonce


def answer(key: bytes, greeting_bytes: bytes) -> bytes:
    """The client's answer to a server's greeting; raises NotALinkPeer if it is none."""
    if greeting_bytes[: len(MAGIC)] != MAGIC:
        raise NotALinkPeer(not_a_greeting(greeting_bytes))
    nonce = greeting_bytes[len(MAGIC) : GREETING_BYTES]
    return MAGIC + hmac.new(key, _CONTEXT + nonce, hashlib.sha256).digest()


def check_answer(key: bytes, nonce: bytes, answer_bytes: bytes) -> str | None:
    """None when the client proved the key; else why not, for the server's log."""
    if answer_bytes[: len(MAGIC)] != MAGIC:
        return f"not a link client{guess_peer(answer_bytes)}"
    expected = hmac.new(key, _CONTEXT + nonce, hashlib.sha256).digest()
    if not hmac.compare_digest(answer_bytes[len(MAGIC) : ANSWER_BYTES], expected):
        return "missing or wrong credentials (the deployment's secret, $SATURN_SECRET)"
    return None


def not_a_greeting(first_bytes: bytes) -> str:
    """What a client says of a server whose first bytes are not a greeting."""
    return f"it answered {first_bytes[:16]!r}, not a link greeting{guess_peer(first_bytes)}"
