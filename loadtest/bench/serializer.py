"""One serializer's throughput and CPU per label: ``python -m loadtest bench serializer``.

A real serializer process (``services.saturn.serializer``) between two regions on one site (no
emulated latency); this process plays both ends: region a's label sink sending update labels
over a tree link, and region b's tree endpoint counting what arrives. For each batch size (labels
per message; a sink batches under load) it sends ``--labels`` labels as fast as the link takes
them and measures labels/s end to end and the serializer's CPU per label (from /proc). Prints a
table; ``--out`` also writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.harness.cluster import one_serializer_topology
from loadtest.harness.cpu import cpu_seconds
from loadtest.harness.experiment import PASSED, BenchError, Experiment
from loadtest.harness.options import numbers, positive
from loadtest.harness.report import num, render_table, say, write_rows
from services import runtime
from services.labelpath.links import TREE, OutgoingLink, TreeEndpoint, neighbours_at
from services.proto import saturn_pb2
from services.topology import Topology
from services.transport.server import LinkServer


@dataclass
class Row:
    batch: int
    sent_per_message: float  # as the link really sent them (it merges batches that pile up)
    labels: int
    seconds: float
    labels_per_s: float
    cpu_us_per_label: float
    cores: float  # the serializer's CPU over the run, in cores


class Counting:
    """Region b's end: counts labels; ``done`` once ``expected`` have come."""

    def __init__(self) -> None:
        self.received = 0
        self.expected = 0
        self.done = asyncio.Event()

    def on_batch(self, sender: str, batch: saturn_pb2.LabelBatch, epoch: int, raw: bytes) -> None:
        self.received += len(batch.labels)
        if self.expected and self.received >= self.expected:
            self.done.set()


def labels_for(start: int, count: int) -> list[saturn_pb2.TreeLabel]:
    return [
        saturn_pb2.TreeLabel(
            type=saturn_pb2.TREE_UPDATE, src="a/0", ts=start + i, target=f"all/r{i % 1000}", group="all"
        )
        for i in range(count)
    ]


async def measure(topology: Topology, pid: int, batches: list[int], total: int) -> list[Row]:
    counter = Counting()
    server = LinkServer("region b", "127.0.0.1", topology.bulk_port("b"))  # where the serializer reaches b
    server.add(TREE, TreeEndpoint("b", neighbours_at("b", topology), counter.on_batch).serve)
    await server.start()
    link = OutgoingLink(topology, "a", "s")
    stop = asyncio.Event()
    running = asyncio.create_task(link.run(stop))
    await asyncio.wait_for(link.connected.wait(), 30)
    rows, ts = [], 1
    try:
        warm = labels_for(ts, 1000)
        counter.expected = 1000
        link.send(warm)
        await asyncio.wait_for(counter.done.wait(), 30)
        ts += 1000
        for batch in batches:
            counter.received, counter.expected = 0, total
            counter.done.clear()
            prepared = [labels_for(ts + k, min(batch, total - k)) for k in range(0, total, batch)]
            ts += total
            cpu_before, started, messages_before = cpu_seconds(pid), time.perf_counter(), link.sent_batches
            for labels in prepared:
                link.send(labels)
                while len(link.out):  # one message each: the link merges batches that pile up
                    await asyncio.sleep(0)
            await asyncio.wait_for(counter.done.wait(), 600)
            seconds, cpu = time.perf_counter() - started, (cpu_seconds(pid) or 0.0) - (cpu_before or 0.0)
            per_message = total / max(1, link.sent_batches - messages_before)
            row = Row(batch, per_message, total, seconds, total / seconds, cpu / total * 1e6, cpu / seconds)
            rows.append(row)
            per_label = cpu / total * 1e6
            say(f"  batch {batch:>5}: {num(total / seconds)} labels/s, {per_label:.1f} µs of CPU per label")
    finally:
        stop.set()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await server.stop()
    return rows


def run_batches(batches: list[int], total: int) -> list[Row]:
    """A serializer of its own, ``total`` labels through it at each batch size."""
    topology = one_serializer_topology()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "topology.json"
        path.write_text(json.dumps(topology.model_dump(mode="json")))
        serializer = subprocess.Popen(
            [sys.executable, "-m", "services.saturn.serializer", "--topology", str(path), "--name", "s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            with asyncio.Runner(loop_factory=runtime.event_loop_factory()) as runner:
                return runner.run(measure(topology, serializer.pid, batches, total))
        except TimeoutError:
            if serializer.poll() is not None:
                raise BenchError(f"the serializer exited with {serializer.returncode}") from None
            raise
        finally:
            serializer.terminate()
            try:
                serializer.wait(10)
            except subprocess.TimeoutExpired:
                serializer.kill()
                serializer.wait(10)


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--labels", type=positive(int), default=100_000, help="labels per batch size (default 100,000)")
    add("--batches", type=numbers(int), default="1,10,100,1000", help="labels per message, comma-separated")


def run(args: argparse.Namespace) -> int:
    say(f"one serializer, {args.labels:,} update labels per batch size, {os.cpu_count()} CPUs ...")
    rows = run_batches(args.batches, args.labels)
    print(render_table(
        "one serializer: labels through it, end to end",
        ["labels per batch", "per message sent", "labels/s", "µs CPU per label", "serializer cores"],
        [
            [str(r.batch), f"{r.sent_per_message:.1f}", num(r.labels_per_s), f"{r.cpu_us_per_label:.1f}",
             f"{r.cores:.2f}"]
            for r in rows
        ],
    ))  # fmt: skip
    write_rows(args.out, "serializer", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="serializer",
    summary="one serializer's throughput and CPU per label, by labels per message",
    minutes=(0.5, 0.5),
    run=run,
    arguments=arguments,
    shared={"out": ""},
    about=__doc__ or "",
)
