"""Who a client is to a region's stores: the ``client`` user, whose password is derived from the
deployment's secret. That user may call a client's gears and nothing else that touches data
(no key command, no script, no administration): the stores enforce it, so a client holding only
its own password cannot do more than the gears allow. The derivation is public; the secret is
what is kept."""

from __future__ import annotations

import hashlib
import hmac
import os

from causal_client.errors import SECRET_ENV

CLIENT_USER = "client"
CLIENT_SECRET_ENV = "SATURN_CLIENT_SECRET"  # a client's own password, for clients without the secret


def client_password(secret: str) -> str:
    return hmac.new(secret.encode(), b"saturn client", hashlib.sha256).hexdigest()


def deployment_secret(secret: str | None) -> str | None:
    """The deployment's secret: the one given, else ``$SATURN_SECRET``."""
    return secret if secret is not None else os.environ.get(SECRET_ENV)


def store_password(secret: str | None) -> str | None:
    """The stores' client user's password: derived from the deployment's secret, or a client's
    own (``$SATURN_CLIENT_SECRET``) where it holds no secret; None where the stores want none."""
    if secret:
        return client_password(secret)
    return os.environ.get(CLIENT_SECRET_ENV) or None


def bearer_metadata(secret: str | None) -> tuple[tuple[str, str], ...]:
    """gRPC metadata carrying the deployment's secret."""
    value = deployment_secret(secret)
    return (("authorization", f"Bearer {value}"),) if value else ()
