"""Visibility through online reconfigurations (paper §6.2): ``python -m loadtest bench reconfigure``.

Runs a topology (default ``demo-3region``) with paced probe writes at every region, scrapes the
regions' visibility histograms every ``--interval`` and, between steady phases, moves the
running system to another tree (``--to``) and back with ``services.launcher reconfigure``'s
procedure; last, it kills the running tree's serializers and then reconfigures (the paper's slower
switch, through timestamp order). Prints per phase the updates made visible, their mean extra
visibility (over each pair's bulk latency) and p99; ``--out`` writes JSON and a PNG timeline.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.phases import Recorder
from loadtest.harness.plots import plt, save
from loadtest.harness.probes import Prober, wait_flowing
from loadtest.harness.report import num, render_table, say, write_rows
from services import plan
from services.launcher import reconfigure
from services.topology import Topology

ROOT = Path(__file__).resolve().parents[2]


def switches(topology: Topology, other: Topology, rate: float, steady_s: float, interval: float) -> Recorder:
    """Steady phases between switches to ``other`` and back, then the slow switch (a crash)."""
    with tempfile.TemporaryDirectory() as scratch, started(topology, Path(scratch)) as cluster:
        recorder = Recorder(cluster.topology, interval)
        names = {0: topology.name, 1: other.name}

        def switch_to(target: Topology) -> None:
            reconfigure.reconfigure(cluster, target, timeout=60, report=lambda line: say(f"    {line}"))

        def slow_switch() -> None:
            for spec in plan.serializers(cluster.topology, cluster.layout):
                cluster.kill(spec.name)  # a crash: the regions fall back to timestamp order
            time.sleep(0.5)
            switch_to(other)

        with Prober(cluster.topology, rate):
            wait_flowing(cluster.topology)
            recorder.thread.start()
            recorder.phase(f"steady on {names[0]}", lambda: time.sleep(steady_s))
            recorder.phase(f"switch to {names[1]}", lambda: switch_to(other), switch=True)
            recorder.phase(f"steady on {names[1]}", lambda: time.sleep(steady_s))
            recorder.phase(f"switch back to {names[0]}", lambda: switch_to(topology), switch=True)
            recorder.phase(f"steady on {names[0]}", lambda: time.sleep(steady_s))
            recorder.phase(f"serializers killed, switch to {names[1]}", slow_switch, switch=True)
            recorder.phase(f"steady on {names[1]}", lambda: time.sleep(steady_s))
            recorder.stopping.set()
            recorder.thread.join(10)
        return recorder


def plot(recorder: Recorder, title: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 3.6))
    points = [(s.t, s.extra_ms) for s in recorder.samples if s.extra_ms is not None]
    ax.plot([t for t, _ in points], [e for _, e in points], color="#1f77b4", lw=1.2,
            label=f"mean extra visibility per {recorder.interval:g} s")  # fmt: skip
    for i, (name, start, end) in enumerate(recorder.spans):
        ax.axvspan(start, end, color=("#ffbb78" if "killed" not in name else "#ff9896"), alpha=0.5,
                   label=name if i < 3 else None)  # fmt: skip
    ax.set_xlabel("seconds")
    ax.set_ylabel("visibility minus bulk latency (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=8, frameon=False)
    save(fig, path, dpi=120)


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--to", default=str(ROOT / "topologies/demo-3region-nv.toml"), help="the other tree")
    add("--rate", type=positive(float), default=40.0, help="probe writes per second per region")
    add("--steady", type=positive(float), default=4.0, help="seconds of each steady phase")
    add("--interval", type=positive(float), default=0.25, help="seconds between scrapes (the plot)")


def run(args: argparse.Namespace) -> int:
    topology = Topology.load(args.topology)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    other = Topology.load(args.to)
    say(f"{topology.name}: switching to {other.name} and back under {args.rate:g} writes/s per region ...")
    recorder = switches(topology, other, args.rate, args.steady, args.interval)
    title = f"{topology.name}: visibility through online reconfigurations ({args.rate:g} writes/s per region)"
    print(render_table(
        title, ["phase", "seconds", "updates visible", "extra ms (mean)", "visibility p99 ms"],
        [[p.name, f"{p.seconds:.2f}", str(p.updates), num(p.extra_ms, sign=True), num(p.p99_ms)]
         for p in recorder.phases],
    ))  # fmt: skip
    write_rows(args.out, "reconfigure", recorder.phases)
    if args.out:
        write_rows(args.out, "reconfigure-timeline", recorder.samples)
        plot(recorder, title, Path(args.out) / "reconfigure.png")
        say(f"wrote {Path(args.out) / 'reconfigure.png'}")
    return PASSED


EXPERIMENT = Experiment(
    name="reconfigure",
    summary="visibility through online reconfigurations of the tree, and through a crashed one (§6.2)",
    minutes=(1.0, 1.0),
    run=run,
    arguments=arguments,
    shared={"topology": ROOT / "topologies/demo-3region.toml", "out": ""},
    about=__doc__ or "",
)
