"""What can go wrong on a link, as types a caller can tell apart (each says why in its message)."""

from __future__ import annotations

from causal_client.tls import TlsError


class LinkError(ConnectionError):
    """A link connection could not be opened or ended; retrying later may help."""


class LinkUnavailable(LinkError):
    """Nothing answered at the endpoint (refused, unreachable, or no greeting in time)."""


class NotALinkPeer(LinkError):
    """The other end does not speak the link transport: a port of another kind (gRPC, Redis,
    HTTP), or a client of another kind dialled a link port."""


class LinkRefused(LinkError):
    """The server took the connection and said no: wrong credentials, a service it does not
    run, or a hello it will not take (a node that is not its neighbour, a backup replica...)."""


class LinkClosed(LinkError):
    """The connection ended (``reason``: what the other end said, or what broke)."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason or "the link closed")
        self.reason = reason


#: What a link's caller retries on: the link's errors, and a failed TLS handshake (the other
#: end's certificate may be fixed or rotated meanwhile; each attempt logs why it failed).
LINK_FAILURES: tuple[type[ConnectionError], ...] = (LinkError, TlsError)
