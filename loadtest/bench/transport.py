"""What a message costs on each candidate transport: ``python -m loadtest bench transport``.

The system's own streams (labels, bulk payloads, acknowledgements, heartbeats) carry small
messages, and in Python what a small message costs is its transport. For each transport a
receiver process and a sender process exchange ``--messages`` messages, each a label batch of one
35-byte label (``LabelBatch`` bytes, parsed at the receiver, as the tree's ends do), and report
the CPU both processes spent (``getrusage``) over the timed part:

- **one at a time**: the sender sends one message and waits for its echo before the next (a
  label at low load); µs of CPU (both ends) per message hop, two hops per round trip;
- **pipelined**: the sender sends every message without waiting (one send call each) and the
  receiver parses each; µs of CPU (both ends) per label.

Transports: ``grpc`` (a grpc.aio bidirectional stream of bytes: the tree and bulk links until
they moved), ``link`` (services/transport, the project's framed transport, on asyncio's default
loop), ``link-uvloop`` (the same on uvloop), ``link-uvloop-tls`` (that, under mutual TLS with
certificates made for the run: what TLS adds per message), ``zmq`` (pyzmq PAIR sockets, zmq.asyncio), and
``floor``: what Python can do at all, an uvloop ``Protocol`` that echoes or counts raw bytes, with
no framing, no handshake and no parsing (the receiver assumes one message per read one at a time,
and counts bytes pipelined), so each transport's own cost is what it adds to that.
Rounds alternate the transports (the machine is shared: read the ratios, measured side by side);
the table shows min / median / max over rounds. ``--out`` writes JSON and a plot.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causal_client import tls
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, render_table, say, write_rows

TRANSPORTS = ("grpc", "link", "link-uvloop", "link-uvloop-tls", "zmq", "floor")
MODES = ("one", "pipelined")
START, END = b"\x00start", b"\x00end"  # markers around the timed part (never a label batch)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def label_message() -> bytes:
    from services.proto import saturn_pb2

    label = saturn_pb2.TreeLabel(
        type=saturn_pb2.TREE_UPDATE,
        src="virginia/0",
        ts=1_795_000_000_000_000,
        target="all/r123",
        group="all",
    )
    return saturn_pb2.LabelBatch(labels=[label]).SerializeToString()


# -- the receiving end: echoes in "one" mode, counts in "pipelined"; reports its CPU at END -------
class Receiver:
    def __init__(self, mode: str) -> None:
        from services.proto import saturn_pb2

        self.parse = saturn_pb2.LabelBatch.FromString
        self.echo = mode == "one"
        self.started = 0.0
        self.count = 0

    def take(self, message: bytes) -> bytes | None:
        """What to answer (None: nothing)."""
        if message == START:
            self.started, self.count = cpu_s(), 0
            return START
        if message == END:
            return json.dumps({"cpu_s": cpu_s() - self.started, "count": self.count}).encode()
        self.parse(message)
        self.count += 1
        return message if self.echo else None


async def serve_link(port: int, mode: str, ready) -> None:
    from services.transport.server import LinkServer

    receiver = Receiver(mode)
    server = LinkServer("bench", "127.0.0.1", port)

    async def handle(connection, hello: bytes) -> None:
        def on_messages(messages: list[bytes]) -> None:  # as a serializer takes labels
            for message in messages:
                reply = receiver.take(message)
                if reply is not None:
                    connection.send(reply)

        connection.accept()
        connection.deliver_to(on_messages)
        await connection.wait_closed()

    server.add("bench", handle)
    await server.start()
    ready()
    await asyncio.Event().wait()


async def send_link(endpoint: str, mode: str, count: int) -> float:
    from services.transport.client import open_link

    connection, _ = await open_link(endpoint, "bench")
    message = label_message()

    async def ask(body: bytes) -> bytes:
        connection.send(body)
        (reply,) = await connection.receive()
        return reply

    return await drive(ask, connection.send, mode, count, message, connection.corked)


async def drive(ask, send, mode: str, count: int, message: bytes, burst=contextlib.nullcontext) -> float:
    """The sender's part, whatever the transport: warm up, timed part, the receiver's report;
    returns the CPU both ends spent in the timed part. Pipelined, messages go in bursts of 256
    between turns of the event loop (``burst``: what the transport offers to send a burst)."""
    for _ in range(200):
        await ask(message) if mode == "one" else send(message)
    await ask(START)
    started = cpu_s()
    if mode == "one":
        for _ in range(count):
            await ask(message)
    else:
        for start in range(0, count, 256):
            with burst():
                for _ in range(min(256, count - start)):
                    send(message)
            await asyncio.sleep(0)  # let the loop write (as a sender among other work does)
    report = json.loads(await ask(END))
    if report["count"] != count:
        raise RuntimeError(f"the receiver got {report['count']} of {count} messages")
    return cpu_s() - started + report["cpu_s"]


async def serve_grpc(port: int, mode: str, ready) -> None:
    import grpc

    receiver = Receiver(mode)

    async def stream(request_iterator, context):
        async for message in request_iterator:
            reply = receiver.take(message)
            if reply is not None:
                yield reply

    handler = grpc.method_handlers_generic_handler(
        "bench.Bench", {"Stream": grpc.stream_stream_rpc_method_handler(stream)}
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    ready()
    await server.wait_for_termination()


async def send_grpc(endpoint: str, mode: str, count: int) -> float:
    import grpc

    outbox: asyncio.Queue[bytes] = asyncio.Queue()

    async def requests():
        while True:
            yield await outbox.get()

    async with grpc.aio.insecure_channel(endpoint) as channel:
        call: Any = channel.stream_stream("/bench.Bench/Stream")(requests())
        replies = call.__aiter__()

        async def ask(body: bytes) -> bytes:
            outbox.put_nowait(body)
            return await anext(replies)

        return await drive(ask, outbox.put_nowait, mode, count, label_message())


async def serve_zmq(port: int, mode: str, ready) -> None:
    import zmq
    import zmq.asyncio

    receiver = Receiver(mode)
    sock = zmq.asyncio.Context.instance().socket(zmq.PAIR)
    sock.bind(f"tcp://127.0.0.1:{port}")
    ready()
    while True:
        reply = receiver.take(await sock.recv())
        if reply is not None:
            await sock.send(reply)


async def send_zmq(endpoint: str, mode: str, count: int) -> float:
    import zmq
    import zmq.asyncio

    sock = zmq.asyncio.Context.instance().socket(zmq.PAIR)
    sock.connect(f"tcp://{endpoint}")

    async def ask(body: bytes) -> bytes:
        await sock.send(body)
        return await sock.recv()

    def send(body: bytes) -> None:
        sock.send(body, copy=True)  # queued by libzmq: completes without the loop (a future)

    return await drive(ask, send, mode, count, label_message())


class FloorServer(asyncio.Protocol):
    """Echoes each read as one message (one at a time), or counts bytes (pipelined)."""

    def __init__(self, mode: str, size: int) -> None:
        self.mode, self.size = mode, size
        self.started, self.bytes = 0.0, 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        # A marker (START, END) ends its read: the sender waits for its answer before sending on.
        for marker in (START, END):
            if data.endswith(marker):
                self.bytes += len(data) - len(marker)
                if marker == START:
                    self.started, self.bytes = cpu_s(), 0
                    self.transport.write(START)  # type: ignore[union-attr]
                else:
                    report = {"cpu_s": cpu_s() - self.started, "count": self.bytes // self.size}
                    self.transport.write(json.dumps(report).encode())  # type: ignore[union-attr]
                return
        self.bytes += len(data)
        if self.mode == "one":
            self.transport.write(data)  # type: ignore[union-attr]


async def serve_floor(port: int, mode: str, ready) -> None:
    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: FloorServer(mode, len(label_message())), "127.0.0.1", port)
    ready()
    await asyncio.Event().wait()


class FloorClient(asyncio.Protocol):
    def __init__(self) -> None:
        self.waiter: asyncio.Future[bytes] | None = None

    def data_received(self, data: bytes) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(data)


async def send_floor(endpoint: str, mode: str, count: int) -> float:
    loop = asyncio.get_running_loop()
    host, port = endpoint.rsplit(":", 1)
    transport, client = await loop.create_connection(FloorClient, host, int(port))

    async def ask(body: bytes) -> bytes:
        client.waiter = loop.create_future()
        transport.write(body)
        return await client.waiter

    return await drive(ask, transport.write, mode, count, label_message())


SERVERS = {"grpc": serve_grpc, "link": serve_link, "link-uvloop": serve_link, "link-uvloop-tls": serve_link,
           "zmq": serve_zmq, "floor": serve_floor}  # fmt: skip
SENDERS = {"grpc": send_grpc, "link": send_link, "link-uvloop": send_link, "link-uvloop-tls": send_link,
           "zmq": send_zmq, "floor": send_floor}  # fmt: skip


def run_loop(transport: str, work) -> object:
    if "uvloop" in transport or transport == "floor":
        import uvloop

        return uvloop.run(work)
    return asyncio.run(work)


# -- the parent: pairs of processes, alternating rounds ------------------------------------------
@dataclass
class Row:
    transport: str
    mode: str
    rounds: list[float]  # µs of CPU (both ends) per message hop (one) or per label (pipelined)

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@functools.cache
def tls_dir() -> Path:
    """Certificates for the ``-tls`` transports: a receiver's ("bench") and a client's."""
    from services import certs

    directory = Path(tempfile.mkdtemp(prefix="bench-tls-")) / "tls"
    certs.ensure(
        directory,
        "bench",
        [certs.Identity("bench", certs.LOOPBACK), certs.Identity("client", certs.LOOPBACK)],
    )
    return directory


def tls_env(transport: str, identity: str) -> dict[str, str] | None:
    """A process's environment for ``transport``: with TLS for the ``-tls`` ones, else its own."""
    if not transport.endswith("-tls"):
        return None
    return {**os.environ, tls.TLS_DIR_ENV: str(tls_dir()), tls.IDENTITY_ENV: identity}


def said_ready(lines: Iterable[str]) -> bool:
    """Whether a receiver said "ready", past the lines every experiment starts with (the machine
    it runs on); False if it ended first."""
    return any(line.strip() == "ready" for line in lines)


def one_pair(transport: str, mode: str, count: int) -> float:
    """µs of CPU per message hop (one at a time) or per label (pipelined), both ends."""
    port = free_port()
    me = [sys.executable, "-m", "loadtest", "bench", "transport"]
    server = subprocess.Popen([*me, "--role", "serve", "--transport", transport, "--mode", mode, "--port",
                               str(port)], stdout=subprocess.PIPE, text=True,
                              env=tls_env(transport, "bench"))  # fmt: skip
    try:
        if server.stdout is None or not said_ready(server.stdout):
            raise RuntimeError(f"the {transport} receiver did not start")
        sender = subprocess.run([*me, "--role", "send", "--transport", transport, "--mode", mode, "--port",
                                 str(port), "--messages", str(count)],
                                capture_output=True, text=True, timeout=600, check=True,
                                env=tls_env(transport, "client"))  # fmt: skip
        cpu = float(sender.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.wait()
    hops = 2 * count if mode == "one" else count
    return cpu / hops * 1e6


def measure(transports: list[str], modes: list[str], count: int, rounds: int) -> list[Row]:
    rows = {(t, m): Row(t, m, []) for m in modes for t in transports}
    for r in range(rounds):
        for mode in modes:
            for transport in transports if r % 2 == 0 else reversed(transports):
                value = one_pair(transport, mode, count)
                rows[transport, mode].rounds.append(value)
                say(f"  round {r + 1}/{rounds} {mode:>9} {transport:<12} {value:8.1f} µs")
    return list(rows.values())


def table(rows: list[Row], count: int) -> str:
    def cell(row: Row) -> str:
        return f"{num(row.median)} ({num(min(row.rounds))}-{num(max(row.rounds))})"

    by = {(r.transport, r.mode): r for r in rows}
    transports = list(dict.fromkeys(r.transport for r in rows))
    modes = list(dict.fromkeys(r.mode for r in rows))
    headers = ["transport"] + [
        {"one": "µs per message hop, one at a time", "pipelined": "µs per label, pipelined"}[m] for m in modes
    ]
    body = [[t] + [cell(by[t, m]) for m in modes] for t in transports]
    title = f"CPU of both ends, median (min-max) of {len(rows[0].rounds)} rounds, {count:,} messages each"
    return render_table(title, headers, body)


def plot(rows: list[Row], path: Path) -> None:
    modes = list(dict.fromkeys(r.mode for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 3.2))
    axes = [axes] if len(modes) == 1 else list(axes)
    for ax, mode in zip(axes, modes, strict=True):
        mine = [r for r in rows if r.mode == mode]
        ax.barh([r.transport for r in mine], [r.median for r in mine], color="#1f77b4")
        ax.set_xscale("log")
        ax.set_xlabel("µs of CPU " + ("per message hop" if mode == "one" else "per label, pipelined"))
        ax.invert_yaxis()
    save(fig, path, dpi=120)


def one_of(known: tuple[str, ...]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list, each one of ``known``."""

    def parse(text: str) -> list[str]:
        names = [name for name in text.split(",") if name]
        unknown = sorted(set(names) - set(known))
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {unknown or '(none)'}: {', '.join(known)}")
        return names

    return parse


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--transports", type=one_of(TRANSPORTS), default=",".join(TRANSPORTS), help="comma-separated")
    add("--modes", type=one_of(MODES), default=",".join(MODES), help="one, pipelined")
    add("--messages", type=positive(int), default=10_000, help="per round and transport")
    # One end of a pair, as one_pair starts it in a process of its own.
    add("--role", choices=("serve", "send"), help=argparse.SUPPRESS)
    add("--transport", help=argparse.SUPPRESS)
    add("--mode", help=argparse.SUPPRESS)
    add("--port", type=int, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.role == "serve":
        run_loop(
            args.transport, SERVERS[args.transport](args.port, args.mode, lambda: print("ready", flush=True))
        )
        return PASSED
    if args.role == "send":
        cpu = run_loop(
            args.transport, SENDERS[args.transport](f"127.0.0.1:{args.port}", args.mode, args.messages)
        )
        print(cpu)
        return PASSED
    transports, modes = args.transports, args.modes
    say(f"transports {', '.join(transports)}; {args.messages:,} messages, {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs ...")  # fmt: skip
    rows = measure(transports, modes, args.messages, args.rounds)
    print(table(rows, args.messages))
    write_rows(args.out, "transport", rows)
    if args.out:
        plot(rows, Path(args.out) / "transport.png")
        say(f"wrote {Path(args.out) / 'transport.png'}")
    return PASSED


EXPERIMENT = Experiment(
    name="transport",
    summary="what a small message costs in CPU on each candidate transport (gRPC, link, zmq, floor)",
    minutes=(1.5, 1.5),
    run=run,
    arguments=arguments,
    shared={"rounds": 3, "out": ""},
    about=__doc__ or "",
)
