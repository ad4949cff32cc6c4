"""What a strong operation costs, per region: ``python -m loadtest bench strong [--topology FILE]
[--rounds N] [--out DIR]``.

A cluster of the topology (default: the paper's seven EC2 regions); from each region in turn, a
client at that region's site runs ``--rounds`` strong writes, reads and read-modify-writes
(compare-and-set) of a register of its own, one at a time, and the median latency of each is set
beside the round trip to the closest majority of regions (the majority-th smallest round trip
from the region, itself included). Vivace's analysis (its §4): a write costs one round trip to a
majority plus local work, a read in the common case one (its write-back skipped), a
read-modify-write two (the promise and the commit). Writes here cost two: they ask a majority
for their timestamps first, so that no clock can order them wrongly (docs/PROTOCOLS.md,
"Clocks"). Prints a table and writes strong.json under ``--out``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from causal_client import CompareAndSet, Session
from loadtest.harness.cluster import clients_at_sites, find_base_port, started, with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import Meaning
from loadtest.harness.report import num, render_table, say, write_rows
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region.toml"
NAMESPACE = "bench"


@dataclass
class StrongRow:
    region: str
    majority_rtt_ms: float  # the round trip that completes a majority from this region
    write_ms: float
    read_ms: float
    execute_ms: float


def majority_rtt_ms(topology: Topology, region: str) -> float:
    rtts = sorted(2 * topology.region_latency_ms(region, other) for other in topology.region_names)
    return rtts[len(rtts) // 2]  # the majority-th smallest (itself, at 0, first)


def median_ms(operation: Callable[[], object], rounds: int) -> float:
    took = []
    for _ in range(rounds):
        began = time.perf_counter()
        operation()
        took.append((time.perf_counter() - began) * 1000)
    return statistics.median(took)


def measure(topology_file: Path, rounds: int) -> list[StrongRow]:
    topology = with_overrides(Topology.load(topology_file), protocol="eventual")
    topology = with_overrides(topology, base_port=find_base_port(topology))
    rows = []
    with (
        tempfile.TemporaryDirectory() as run_dir,
        started(topology, Path(run_dir)) as cluster,
        clients_at_sites(cluster.topology) as clients,
    ):
        for region in cluster.topology.region_names:
            session: Session = clients[region].session(region)
            key, values = f"{region}-register", iter(range(10**9))
            session.strong_write(NAMESPACE, key, "0")  # connections made, the register there
            # (each lambda is called at once, within this turn of the loop)
            write = median_ms(lambda: session.strong_write(NAMESPACE, key, str(next(values))), rounds)  # noqa: B023
            read = median_ms(lambda: session.strong_read(NAMESPACE, key), rounds)  # noqa: B023
            # a compare-and-set that does not apply runs the same phases as one that does
            execute = median_ms(
                lambda: session.execute(NAMESPACE, key, CompareAndSet("x", "y")),  # noqa: B023
                rounds,
            )
            row = StrongRow(region, majority_rtt_ms(cluster.topology, region), write, read, execute)
            rows.append(row)
            say(
                f"  {region}: majority round trip {row.majority_rtt_ms:.0f} ms; write {write:.1f}, "
                f"read {read:.1f}, read-modify-write {execute:.1f} ms (medians of {rounds})"
            )
    return rows


def table(rows: list[StrongRow]) -> str:
    lines = [
        [
            r.region, num(r.majority_rtt_ms, 0), num(r.write_ms), num(r.read_ms), num(r.execute_ms),
            num(r.write_ms / r.majority_rtt_ms, 2) if r.majority_rtt_ms else "-",
            num(r.read_ms / r.majority_rtt_ms, 2) if r.majority_rtt_ms else "-",
            num(r.execute_ms / r.majority_rtt_ms, 2) if r.majority_rtt_ms else "-",
        ]
        for r in rows
    ]  # fmt: skip
    heads = [
        "region",
        "majority RTT ms",
        "write ms",
        "read ms",
        "rmw ms",
        "write / RTT",
        "read / RTT",
        "rmw / RTT",
    ]
    return render_table(
        "Strong operations, medians (write 2 RTT: a query, then Vivace's 1; read 1; rmw 2)", heads, lines
    )


def run(args: argparse.Namespace) -> int:
    say(f"strong operations: {args.rounds} of each kind from every region of {Path(args.topology).name}")
    rows = measure(Path(args.topology), args.rounds)
    print(table(rows))
    write_rows(args.out, "strong", rows)
    return PASSED


EXPERIMENT = Experiment(
    name="strong",
    summary="a strong write, read and read-modify-write per region against the majority round trip",
    minutes=(2.0, 2.0),  # no short version: seven regions, 20 operations of each kind from each
    run=run,
    shared={
        "topology": TOPOLOGY,
        "rounds": Meaning(20, "operations of each kind per region"),
        "out": "bench-results/strong",
    },
    about=__doc__ or "",
)
