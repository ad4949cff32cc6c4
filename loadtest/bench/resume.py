"""What resuming a session costs, by path: ``python -m loadtest bench resume``.

Each round plays the sequence where a label's origin says nothing of where its session's past is:
a session writes x at c, migrates to b, and reads there a newer y made at a (its label is y's,
made at a). Then the same session is resumed four ways, and each time must read x:

- at its own region from its token (no call);
- at a from its token: a migration label made at b, which a waits for (§4.3);
- at a from its bare label: a waits until every origin has passed it (Alg. 1's stabilization);
- the same right after the write, while x is still on its way to a (the case that was broken).

Prints milliseconds per path (median, p90, max) and the rounds whose resumed session missed x.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from causal_client import CausalClient, Session
from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import FAILED, PASSED, Experiment
from loadtest.harness.options import Meaning
from loadtest.harness.report import num, render_table, say
from loadtest.harness.stats import Latency
from services.topology import Topology

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = PROJECT_ROOT / "topologies" / "causality-3region.toml"
SETTLE_S = 0.3  # x has reached every region (a→c is the slowest path, 100 ms)


def _session_with_a_past_elsewhere(client: CausalClient, row: str) -> Session:
    session = client.session("c")
    session.write("all", row, {"v": "x"})
    session.migrate("b")
    newer = f"{row}-newer"
    client.session("a").write("all", newer, {"v": "y"})
    while not session.read("all", newer):
        time.sleep(0.001)
    return session


def run(args: argparse.Namespace) -> int:
    topology = with_overrides(Topology.load(TOPOLOGY), protocol=args.protocol)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    paths: dict[str, Callable[[CausalClient, Session], Session]] = {
        "own region, token": lambda client, s: client.session("b", label=s.token),
        "elsewhere, token (migration)": lambda client, s: client.session("a", label=s.token),
        "elsewhere, bare label (stabilization)": lambda client, s: client.session("a", label=s.label),
        "elsewhere, token, x in flight": lambda client, s: client.session("a", label=s.token),
    }
    times: dict[str, list[float]] = {path: [] for path in paths}  # ms
    misses = dict.fromkeys(paths, 0)
    with (
        tempfile.TemporaryDirectory() as run_dir,
        started(topology, Path(run_dir)),
        CausalClient.connect(topology.client_address("a")) as client,
    ):
        for region in topology.region_names:
            client.session(region)  # connections up front
        for round_ in range(args.rounds):
            for path, resume in paths.items():
                row = f"resume-{round_}-{time.monotonic_ns()}"
                session = _session_with_a_past_elsewhere(client, row)
                if "in flight" not in path:
                    time.sleep(SETTLE_S)
                began = time.perf_counter()
                resumed = resume(client, session)
                times[path].append(1000 * (time.perf_counter() - began))
                misses[path] += not resumed.read("all", row)
            if (round_ + 1) % 5 == 0:
                say(f"[{args.protocol}] {round_ + 1}/{args.rounds} rounds")
    rows = []
    for path, samples in times.items():
        latency = Latency.of(samples)
        ms = [num(v) for v in (latency.p50_ms, latency.p90_ms, latency.max_ms)]
        rows.append([path, *ms, f"{misses[path]}/{latency.count}"])
    headers = ["resume path", "median ms", "p90 ms", "max ms", "missed own write"]
    print(render_table(f"Resuming a session ({args.protocol}, {topology.name})", headers, rows))
    return PASSED if args.protocol != "saturn" or not any(misses.values()) else FAILED


EXPERIMENT = Experiment(
    name="resume",
    summary="what resuming a session costs by path (token, bare label, write in flight)",
    minutes=(0.75, 0.75),
    run=run,
    shared={"protocol": "saturn", "rounds": Meaning(20, "rounds per path")},
    about=__doc__ or "",
)
