"""The relay of one site pair's link (``python -m services.relay.relay --pair A-C``): every
connection between the two sites goes through it (services/wan/routes.py says which port
carries what), and each direction's bytes share the link's bandwidth (``LinkScheduler``), so
that a flood delays everything behind it, as on a real link, whichever process sends it.

Why a relay and not a limit in each process: a link's capacity is shared by every connection
between two sites (bulk senders, tree and C3 links, clients, claims), which live in different
processes; only a component they all go through can make one flood delay them all. The
emulated latency stays where it was (``causal_client.wan``), so a link with a bandwidth adds
queueing and serialization time on top of it.

A connection's class (``meta``, ``ship``, ``data``) is the port it came to; each direction of
it is critical or bulk (``DIRECTIONS``). A pipe reads no more from its socket while
``buffer_s`` of the link's capacity is queued from it (the link's buffer: a flood fills it,
and a FIFO link makes everything wait behind it). Each direction also has a *flood* port:
bytes sent there cross the link as bulk and are dropped at the far end, and when the sender
shuts its side, the reply is ``"<bytes> <first> <last>\\n"``: how much left the link, and when
its first and last chunk did (Unix time; the bandwidth bench and the congestion nemesis use it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time

from services import auth, runtime
from services.topology import Topology
from services.wan.routes import FLOOD, Route, split_endpoint
from services.wan.scheduler import BULK, CRITICAL, LinkScheduler

log = logging.getLogger("relay")

#: per traffic class: the class of its bytes from the connecting side, and back
DIRECTIONS = {
    "meta": (CRITICAL, CRITICAL), "ship": (BULK, CRITICAL), "data": (BULK, BULK), FLOOD: (BULK, BULK),
}  # fmt: skip
READ_BYTES = 64 * 1024
BUFFER_S = 1.0  # how much of the link's capacity one pipe may have queued (the link's buffer)
MIN_BUFFER_BYTES = 64 * 1024
KERNEL_BUFFER_BYTES = 64 * 1024


class Pipe:
    """One direction of one connection: reads, queues on the link, writes what left it."""

    def __init__(self, link: LinkScheduler, cls: str, reader, writer, limit: int):
        self.link = link
        self.cls = cls
        self.reader = reader
        self.writer = writer
        self.limit = limit
        self.queued = 0
        self.drained = asyncio.Event()
        self.delivered = 0
        self.first_at: float | None = None
        self.last_at = 0.0

    def deliver(self, data: bytes) -> None:
        self.queued -= len(data)
        self.delivered += len(data)
        now = time.time()  # wall clock: floods through several relays are compared (bench)
        self.first_at = self.first_at if self.first_at is not None else now
        self.last_at = now
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(data)
        if self.queued <= self.limit // 2:
            self.drained.set()

    async def run(self) -> None:
        """Until the reading side ends; then, once all it queued has left, the write side closes."""
        while data := await self.reader.read(READ_BYTES):
            self.queued += len(data)
            self.link.submit(self.cls, data, self.deliver)
            while self.queued > self.limit:
                self.drained.clear()
                await self.drained.wait()
        while self.queued > 0:
            self.drained.clear()
            await self.drained.wait()
        if self.writer is not None and self.writer.can_write_eof():
            with contextlib.suppress(OSError):
                self.writer.write_eof()


class Relay:
    def __init__(self, topology: Topology, pair: str):
        self.topology = topology
        self.routes = [r for r in topology.relay_routes if r.pair == pair]
        if not self.routes:
            raise SystemExit(f"no link with a bandwidth between the sites of {pair!r} in this topology")
        if not auth.is_loopback(self.routes[0].host):  # it checks no credentials (its flood port!)
            raise SystemExit(
                f"relay {pair}: relays emulate links on one machine and listen on loopback only, not on "
                f"{self.routes[0].host}; across hosts, mark traffic with DSCP and queue it by priority "
                '(docs/OPERATIONS.md, "WAN emulation")'
            )
        a, b = self.routes[0].from_site, self.routes[0].to_site
        rate = topology.bandwidth_mbit_between(a, b)
        assert rate is not None
        self.links = {(x, y): LinkScheduler(rate, topology.priority) for x, y in ((a, b), (b, a))}
        self.limit = max(MIN_BUFFER_BYTES, int(rate * 1e6 / 8 * BUFFER_S))

    async def serve(self, stop: asyncio.Event) -> None:
        servers = [await asyncio.start_server(self.handler(r), sock=_listening(r)) for r in self.routes]
        log.info("relay %s: %d ports, %.3g Mbit/s each way%s", self.routes[0].pair, len(servers),
                 self.links[next(iter(self.links))].rate_bytes_s * 8 / 1e6,
                 ", critical before bulk" if self.topology.priority else ", FIFO")  # fmt: skip
        try:
            await asyncio.gather(stop.wait(), *(link.run(stop) for link in self.links.values()))
        finally:
            for server in servers:
                server.close()

    def handler(self, route: Route):
        there, back = DIRECTIONS[route.cls]
        forward = self.links[route.from_site, route.to_site]
        backward = self.links[route.to_site, route.from_site]

        async def flood(reader, writer) -> None:
            pipe = Pipe(forward, there, reader, None, self.limit)
            await pipe.run()
            first = pipe.first_at if pipe.first_at is not None else pipe.last_at
            writer.write(f"{pipe.delivered} {first:.6f} {pipe.last_at:.6f}\n".encode())
            await writer.drain()
            writer.close()

        async def relay(reader, writer) -> None:
            try:
                target_reader, target_writer = await asyncio.open_connection(sock=_connected(route.endpoint))
            except OSError as exc:
                log.warning("relay %s: %s unreachable (%s)", route.pair, route.endpoint, exc)
                writer.close()
                return
            pipes = [
                Pipe(forward, there, reader, target_writer, self.limit),
                Pipe(backward, back, target_reader, writer, self.limit),
            ]
            try:
                await asyncio.gather(*(p.run() for p in pipes))
            except (ConnectionError, OSError):
                pass
            finally:
                for w in (writer, target_writer):
                    w.close()

        return flood if route.cls == FLOOD else relay


def _small_buffers(sock: socket.socket) -> socket.socket:
    """The kernel's buffers kept small, so that the link's buffer is the relay's (``BUFFER_S``):
    autotuned, they hold megabytes on loopback, and a flood would congest the link for as long
    after it stopped."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, KERNEL_BUFFER_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, KERNEL_BUFFER_BYTES)
    return sock


def _listening(route: Route) -> socket.socket:
    sock = _small_buffers(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((route.host, route.port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def _connected(endpoint: str) -> socket.socket:
    sock = _small_buffers(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.settimeout(5.0)
    sock.connect(split_endpoint(endpoint))  # the same host: at once, or refused
    sock.setblocking(False)
    return sock


async def serve(topology: Topology, pair: str, index: int, stop: asyncio.Event) -> None:
    await Relay(topology, pair).serve(stop)


def main() -> None:
    runtime.service_main("relay: a site pair's link with a bandwidth", serve, node_flag="--pair")


if __name__ == "__main__":
    main()
