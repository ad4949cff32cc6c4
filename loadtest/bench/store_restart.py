"""How long a region's shard is unavailable when its store dies, and what survives: ``python -m
loadtest bench store-restart``.

The standalone store's answer to a crash is a restart: the supervisor starts the dead
redis-server again and it replays its AOF before it answers. That is the baseline a region on
Redis Cluster (a replica promoted instead) is to be measured against. For each preload (rows
written before the crash, so the AOF the restart replays grows), a client at region ``a``
writes rows to the shard at a steady pace; the store is killed (SIGKILL, as a crash: the
supervisor restarts it, nothing holds it down), and the writer keeps trying. Reported per
preload: the AOF's size, how long writes were refused (from the kill to the first write that
succeeded after it), and how many acknowledged writes the restarted store lost (with
``appendfsync always``: none). ``--out`` also writes JSON.
"""

from __future__ import annotations

import argparse
import functools
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

from causal_client import CausalClient, Mutation
from loadtest.bench.store_outage_family import (
    CLIENT_TIMEOUT_S,
    GROUP,
    REGION,
    add_around,
    crash_and_write,
    report_outages,
)
from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import Experiment
from loadtest.harness.options import numbers
from loadtest.harness.report import say
from services.topology import Topology

PRELOAD_BATCH = 100  # rows per atomic batch while preloading


@dataclass
class Row:
    preload: int
    aof_bytes: int
    unavailable_s: float
    failed_writes: int  # writes refused or unanswered while the store was down
    acknowledged: int  # writes acknowledged around the crash
    lost: int  # of those, missing after the restart


def aof_bytes(directory: Path) -> int:
    """The AOF's size on disk (Redis 7 keeps it as files under appendonlydir)."""
    return sum(p.stat().st_size for p in directory.rglob("*.aof*") if p.is_file())


def preload(client: CausalClient, rows: int, tag: str) -> None:
    session = client.session(REGION)
    for start in range(0, rows, PRELOAD_BATCH):
        part = range(start, min(rows, start + PRELOAD_BATCH))
        session.batch([Mutation(GROUP, f"{tag}-{i}").set("v", b"x" * 200) for i in part])


def one_crash(topology: Topology, rows: int, around_s: float) -> Row:
    """A fresh cluster (so the supervisor's first restart delay applies, as to any store that
    had lived a while), ``rows`` preloaded, its store at region a killed once."""
    store = f"{REGION}.redis0"
    scratch = tempfile.TemporaryDirectory(prefix="store-restart-")
    with scratch, started(topology, Path(scratch.name)) as cluster:
        client = CausalClient.connect(
            topology.client_address(REGION), site=topology.region(REGION).site,
            endpoints=topology.client_endpoints(), timeout=CLIENT_TIMEOUT_S,
        )  # fmt: skip
        try:
            say(f"preloading {rows} rows ...")
            preload(client, rows, "pre")
            say(f"{rows} rows: killing {store} ...")
            popen = cluster.processes[store].popen
            crash = functools.partial(popen.send_signal, signal.SIGKILL)  # the supervisor restarts it
            outage = crash_and_write(client, crash, "w-{}".format, around_s)
        finally:
            client.close()
        row = Row(rows, aof_bytes(Path(cluster.data_dir) / f"{REGION}-0"), outage.unavailable_s,
                  outage.failed_writes, outage.acknowledged, outage.lost)  # fmt: skip
    say(f"  back after {row.unavailable_s:.2f} s; {row.lost} of {row.acknowledged} acknowledged lost")
    return row


def run(args: argparse.Namespace) -> int:
    topology = with_overrides(Topology.load(args.topology), protocol=args.protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    rows = [one_crash(topology, target, args.around) for target in sorted(args.preload)]
    title = f"{topology.name} ({topology.protocol}): a store killed and restarted by the supervisor"
    cells = [[str(r.preload), f"{r.aof_bytes / 1e6:.1f}"] for r in rows]
    return report_outages(args.out, "store-restart", title, ["rows before", "AOF MB"], cells, rows)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preload", type=numbers(int), default=[1000, 20000, 100000],
        help="rows in the store before each crash, a list (default: 1000,20000,100000)")  # fmt: skip
    add_around(parser)


EXPERIMENT = Experiment(
    name="store-restart",
    summary="a store killed and restarted from its AOF: how long its shard refuses writes, what it lost",
    minutes=(1.5, 1.5),
    run=run,
    arguments=arguments,
    shared={"topology": "topologies/two-region.toml", "protocol": "saturn", "out": ""},
    about=__doc__ or "",
)
