"""A flood of bulk bytes across one direction of a link with a bandwidth (the relay's flood
port), as a congested link's background traffic: the bandwidth bench and the history checker's
congestion nemesis use it."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

from services.wan.routes import split_endpoint

WRITE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Flood:
    sent: int  # bytes written into the link
    delivered: int  # bytes that left the link at the far end
    first: float  # when its first chunk left the link (Unix time)
    last: float  # and its last

    @property
    def seconds(self) -> float:
        return self.last - self.first

    @property
    def mbit_s(self) -> float | None:
        return self.delivered * 8 / self.seconds / 1e6 if self.seconds > 0 else None


def flood(
    endpoint: str, seconds: float, stop: threading.Event | None = None, timeout: float = 120.0
) -> Flood:
    """Writes as fast as the link takes them for ``seconds`` (or until ``stop``), then waits for
    what is queued to cross and returns the relay's account of it."""
    chunk = b"\0" * WRITE_BYTES
    sent = 0
    with socket.create_connection(split_endpoint(endpoint), timeout=timeout) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, WRITE_BYTES)  # no megabytes in the kernel
        ends = time.monotonic() + seconds
        while time.monotonic() < ends and not (stop and stop.is_set()):
            sock.sendall(chunk)
            sent += len(chunk)
        sock.shutdown(socket.SHUT_WR)
        with sock.makefile("r") as reply:
            delivered, first, last = reply.readline().split()
    return Flood(sent, int(delivered), float(first), float(last))
