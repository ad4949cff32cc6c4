"""A blocking health check of a link server, for the launcher and containers' HEALTHCHECK: it
imports only the transport's framing and handshake (no gRPC, no event loop), as a check runs in
a new Python every few seconds."""

from __future__ import annotations

import socket

from causal_client import tls
from services.transport import handshake
from services.transport.frames import FrameDecoder, Kind, open_frame

HEALTH = "health"  # the service every link server runs: the hello names what is asked about
SERVING, NOT_SERVING = b"SERVING", b"NOT_SERVING"


def health(endpoint: str, service: str = "", secret: str | None = None, timeout_s: float = 0.5) -> bool:
    """Whether the link server at ``endpoint`` reports ``service`` SERVING ("" is the process:
    serving once it listens). Any failure, a port of another kind included, is "not healthy".
    Under the deployment's TLS the check is TLS too (a node's certificate names loopback)."""
    host, port = endpoint.rsplit(":", 1)
    try:
        context = tls.process_context(server=False)
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            sock = raw if context is None else context.wrap_socket(raw, server_hostname=host)
            sock.settimeout(timeout_s)
            received = b""
            while len(received) < handshake.GREETING_BYTES:
                chunk = sock.recv(handshake.GREETING_BYTES - len(received))
                if not chunk:
                    return False
                received += chunk
            proof = handshake.answer(handshake.link_key(secret), received)
            sock.sendall(proof + open_frame(HEALTH, service.encode()))
            decoder = FrameDecoder(max_body=1024)
            while chunk := sock.recv(1024):
                for kind, body in decoder.feed(chunk):
                    return kind == Kind.ACCEPT and body == SERVING
    except (OSError, ValueError):  # ssl.SSLError and tls.TlsError are OSErrors too
        return False
    return False
