"""What kind of server, or client, is at the other end of a connection that does not speak the
protocol expected: guessed from its first bytes. A client pointed at the wrong kind of port says
what it found there and what to pass instead (``CausalClient.connect`` given a gateway's or a web
app's port), and so does a link port dialled by something else (services/transport/handshake.py).
"""

from __future__ import annotations

import socket

LINK_MAGIC = b"SATURN-LINK "  # the link transport's greeting starts so (services/transport/handshake.py)
PROBE_S = 0.5


def guess_peer(first_bytes: bytes) -> str:
    """A hint at what sent ``first_bytes`` ("" if none fits), as " (it speaks ...)"."""
    if first_bytes.startswith(b"PRI * HTTP/2") or first_bytes[3:4] in (b"\x04", b"\x07"):
        return " (it speaks HTTP/2: a gRPC port or client)"
    if first_bytes[:1] in (b"*", b"+", b"-", b"$", b":"):
        return " (it speaks RESP: a Redis port or client)"
    http = first_bytes.split(b" ", 1)[0] in (b"GET", b"POST", b"HEAD", b"PUT", b"HTTP/1.1", b"HTTP/1.0")
    if http or first_bytes.lstrip().lower().startswith((b"<!doctype", b"<html")):  # or a bare error page
        return " (it speaks HTTP/1: a web or metrics port or client)"
    if first_bytes.startswith(LINK_MAGIC):
        return " (it speaks the link transport: a serializer's, proxy's or bulk port)"
    return ""


def probe(address: str, timeout: float = PROBE_S) -> bytes:
    """The first bytes a server at ``host:port`` says, unasked or after a Redis PING (b"" if it
    says nothing, or cannot be reached)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            try:
                first = sock.recv(64)
            except TimeoutError:
                first = b""
            if first:
                return first
            sock.sendall(b"PING\r\n")
            return sock.recv(64)
    except (OSError, ValueError):
        return b""
