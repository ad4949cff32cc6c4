"""What every service process shares: arguments, logging, gRPC server start-up (the gateway's),
the event loop, graceful stop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from causal_client import tls
from services import auth
from services.topology import Topology, load_topology

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.so_reuseport", 1),
]


def parse_args(description: str, node_flag: str = "--region") -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--topology", required=True, help="topology file (.toml or launcher's .json)")
    parser.add_argument(node_flag, dest="node", required=True, help="which region (or serializer)")
    parser.add_argument("--index", type=int, default=0, help="which of several identical processes")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args()
    logging.basicConfig(
        level=args.log_level,
        format=f"%(asctime)s %(levelname)s {description.split(':')[0]} %(name)s: %(message)s",
    )
    return args


def new_server(port: int, host: str = "127.0.0.1") -> tuple[grpc.aio.Server, health.HealthServicer]:
    """A grpc.aio server on host:port with the standard health service (SERVING once started),
    refusing calls without the deployment's secret when one is set (services/auth.py)."""
    auth.require_for(host, f"a gRPC server on port {port}")
    server = grpc.aio.server(options=GRPC_OPTIONS, interceptors=auth.server_interceptors())
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    credentials = tls.grpc_server_credentials()
    address = f"{host}:{port}"
    added = (
        server.add_insecure_port(address)
        if credentials is None
        else server.add_secure_port(address, credentials)
    )
    if added == 0:
        raise OSError(f"cannot listen on {host}:{port}")
    return server, health_servicer


def mark_serving(health_servicer: health.HealthServicer) -> None:
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)


T = TypeVar("T")
Serve = Callable[[Topology, str, int, asyncio.Event], Awaitable[None]]


def service_main(
    description: str, serve: Serve, node_flag: str = "--region", fast_loop: bool = False
) -> None:
    """The ``main()`` of every service process: ``serve(topology, node, index, stop_event)``.
    ``fast_loop``: on uvloop (the processes of the link transport, where a message's cost is
    mostly the event loop's; not under gRPC's own asyncio integration)."""
    args = parse_args(description, node_flag)
    topology = load_topology(args.topology)
    run_until_stopped(lambda stop: serve(topology, args.node, args.index, stop), fast_loop)


def run_until_stopped(main: Callable[[asyncio.Event], Awaitable[None]], fast_loop: bool = False) -> None:
    """Runs ``main(stop_event)``; SIGTERM and SIGINT set the event for a graceful stop."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await main(stop)
        except Exception:
            # Crash-only: a service whose work failed exits at once, for its supervisor to start
            # it afresh. Letting asyncio cancel the other tasks first can hang for good (a task
            # that misses its cancellation keeps a half-dead process alive: seen once, a bulk
            # sender whose stream reader had died went on reconnecting, shipping nothing).
            logging.getLogger("service").exception("the service failed; exiting")
            os._exit(1)

    with asyncio.Runner(loop_factory=event_loop_factory() if fast_loop else None) as runner_:
        runner_.run(runner())


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop where it is installed (it halves the CPU of a small message here:
    loadtest/bench/transport.py), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def unless_stopped(stop: asyncio.Event, work: Awaitable[None]) -> None:
    """Awaits ``work`` unless the process is asked to stop first, in which case ``work`` is
    cancelled (a connection attempt to a peer that is down would otherwise block the stop)."""
    await first_or_stop(stop, work, None)


async def first_or_stop(stop: asyncio.Event, work: Awaitable[T], default: T) -> T:
    """``work``'s result, or ``default`` if the process is asked to stop first (``work`` is
    cancelled then)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return default if task.cancelled() else task.result()


async def until_first_ends(*work: Awaitable[None]) -> None:
    """Runs ``work`` side by side until one piece of it ends; the rest is cancelled then. An
    exception of the one that ended is raised as it is (not wrapped in an ExceptionGroup as a
    TaskGroup's is, so that a caller's ``except RedisError`` still sees it)."""
    tasks = [asyncio.ensure_future(w) for w in work]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleeps, but wakes at once when the process is asked to stop."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):  # not wait_for: see services/bulk/tail.py
            await stop.wait()


class Backoff:
    """How long to wait before the next try of something that keeps failing (a connection to a
    peer): each delay of ``delays`` in turn, then the last one again; ``reset`` once it worked."""

    def __init__(self, delays: Sequence[float]) -> None:
        if not delays or any(d < 0 for d in delays):
            raise ValueError("a backoff needs at least one delay, none negative")
        self.delays = tuple(delays)
        self.failures = 0

    def reset(self) -> None:
        self.failures = 0

    def next_delay(self) -> float:
        delay = self.delays[min(self.failures, len(self.delays) - 1)]
        self.failures += 1
        return delay
