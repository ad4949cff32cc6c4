"""Visibility while a serializer dies, with and without replicas: ``python -m loadtest bench failover``.

The demo's three regions under paced probe writes, twice: its serializer alone, then as a group
of two replicas (replicas.py). Each run: a steady phase, the primary killed (SIGKILL) for a phase,
then restarted for a phase. Without replicas the regions order by timestamp while it is down
(paper §6.1); with them the backup takes over. Prints, per run and phase, the updates made
visible, their mean extra visibility (over each pair's bulk latency) and p99; ``--out`` writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.phases import Recorder
from loadtest.harness.probes import Prober, wait_flowing
from loadtest.harness.report import num, render_table, say, write_rows
from services import plan
from services.saturn.replicas import role_of
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Row:
    replicas: int
    phase: str
    seconds: float
    updates: int
    extra_ms: float | None
    p99_ms: float | None


def is_primary(endpoint: str) -> bool:
    reply = asyncio.run(role_of(endpoint, timeout_s=2))
    return reply is not None and reply.primary


def primary_of(cluster, name: str) -> str:
    """The process name of the serializer's primary replica (the only one without replicas)."""
    specs = [s for s in plan.serializers(cluster.topology, cluster.layout) if s.node == name]
    if len(specs) == 1:
        return specs[0].name
    host = cluster.topology.node_host(name)
    return next(s.name for s in specs if is_primary(f"{host}:{s.port}"))


def with_replicas(base: Topology, replicas: int, rate: float, phase_s: float) -> list[Row]:
    """One run: steady, the serializer's primary killed, restarted (``phase_s`` each)."""
    data = base.model_dump()
    for serializer in data["serializers"]:
        serializer["replicas"] = replicas
    topology = Topology.from_dict(data, source=base.source)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    name = topology.serializers[0].name
    with tempfile.TemporaryDirectory() as scratch, started(topology, Path(scratch)) as cluster:
        recorder = Recorder(cluster.topology, 0.25)
        victim = ""

        def kill() -> None:
            nonlocal victim
            victim = primary_of(cluster, name)
            cluster.kill(victim)
            time.sleep(phase_s)

        def restart() -> None:
            cluster.restart(victim)
            time.sleep(phase_s)

        with Prober(cluster.topology, rate):
            wait_flowing(cluster.topology)
            recorder.phase("steady", lambda: time.sleep(phase_s))
            recorder.phase("primary killed", kill)
            recorder.phase("restarted", restart)
    return [Row(replicas, p.name, p.seconds, p.updates, p.extra_ms, p.p99_ms) for p in recorder.phases]


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--rate", type=positive(float), default=40.0, help="probe writes per second per region")
    add("--phase", type=positive(float), default=4.0, help="seconds of each phase")


def run(args: argparse.Namespace) -> int:
    base = Topology.load(args.topology)
    rows: list[Row] = []
    for replicas in (1, 2):
        say(f"{base.name}: serializer with {replicas} replica(s), {args.rate:g} writes/s per region ...")
        rows += with_replicas(base, replicas, args.rate, args.phase)
    print(render_table(
        f"{base.name}: visibility while the serializer's primary is killed",
        ["replicas", "phase", "seconds", "updates visible", "extra ms (mean)", "visibility p99 ms"],
        [[str(r.replicas), r.phase, f"{r.seconds:.2f}", str(r.updates), num(r.extra_ms, sign=True),
          num(r.p99_ms)] for r in rows],
    ))  # fmt: skip
    write_rows(args.out, "failover", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="failover",
    summary="visibility while a serializer's primary is killed and restarted, with and without replicas",
    minutes=(1.0, 1.0),
    run=run,
    arguments=arguments,
    shared={"topology": ROOT / "topologies/demo-3region.toml", "out": ""},
    about=__doc__ or "",
)
