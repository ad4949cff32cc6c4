"""Who a client is to a region's stores: the ``client`` user, whose password is derived from the
deployment's secret. That user may call a client's gears and nothing else that touches data
(no key command, no script, no administration): the stores enforce it, so a client holding only
its own password cannot do more than the gears allow. The derivation is public; the secret is
what is kept."""

from __future__ import annotations

import hashlib
import hmac

CLIENT_USER = "client"
CLIENT_SECRET_ENV = "SATURN_CLIENT_SECRET"  # a client's own password, for clients without the secret


def client_password(secret: str) -> str:
    return hmac.new(secret.encode(), b"saturn client", hashlib.sha256).hexdigest()
