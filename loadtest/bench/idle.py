"""What each protocol costs when nothing happens: ``python -m loadtest bench idle [--topology FILE]
[--protocols LIST] [--seconds S]``.

Each protocol runs the topology (default: the paper's seven regions on the generated tree) on a
fresh cluster with no client at all; after ``--settle`` seconds, the CPU its processes use over
``--seconds`` is read from /proc (``cpu.py``), in per cent of one core, in all and by role. This is
the price of a protocol's metadata alone: Saturn's sink and tree heartbeats, GentleRain's and
Cure's bulk heartbeats and stabilization. On one machine emulating every region, it is taken from
the CPU the regions' work would have had.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.cpu import CLIENT_ROLE, CpuMeter, by_role, used_between
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.report import num, render_table, say, write_rows
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region-m.toml"
PROTOCOLS = ("eventual", "saturn", "gentlerain", "cure")


@dataclass
class IdleRow:
    protocol: str
    seconds: float
    percent_of_a_core: float
    by_role: dict[str, float] = field(default_factory=dict)  # per cent of one core


def measure(topology_file: Path, protocol: str, settle: float, seconds: float) -> IdleRow:
    topology = with_overrides(Topology.load(topology_file), protocol=protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    with tempfile.TemporaryDirectory() as scratch, started(topology, Path(scratch)) as cluster:
        meter = CpuMeter({name: r.popen.pid for name, r in cluster.processes.items()})
        time.sleep(settle)
        before = meter.snapshot()
        time.sleep(seconds)
        used = used_between(before, meter.snapshot())
    used.pop(CLIENT_ROLE, None)
    roles = {role: 100 * s / seconds for role, s in by_role(used).items()}
    return IdleRow(protocol, seconds, sum(roles.values()), roles)


def table(rows: list[IdleRow]) -> str:
    roles = sorted(
        {r for row in rows for r in row.by_role}, key=lambda r: -max(x.by_role.get(r, 0) for x in rows)
    )
    lines = [
        [row.protocol, num(row.percent_of_a_core)] + [num(row.by_role.get(r)) for r in roles] for row in rows
    ]
    return render_table("Idle cluster: CPU in % of one core", ["protocol", "all", *roles], lines)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--settle", type=positive(float), default=3.0, help="seconds after start before measuring"
    )
    parser.add_argument("--seconds", type=positive(float), default=5.0, help="seconds measured")


def run(args: argparse.Namespace) -> int:
    rows = []
    for protocol in args.protocols:
        rows.append(measure(Path(args.topology), protocol, args.settle, args.seconds))
        say(f"[{protocol}] idle: {rows[-1].percent_of_a_core:.1f} % of one core")
    print(table(rows))
    write_rows(args.out, "idle", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="idle",
    summary="CPU of an idle cluster per protocol: the price of metadata alone",
    minutes=(1.5, 1.5),
    run=run,
    arguments=arguments,
    shared={"topology": TOPOLOGY, "protocols": PROTOCOLS, "out": "bench-results/idle"},
    about=__doc__ or "",
)
