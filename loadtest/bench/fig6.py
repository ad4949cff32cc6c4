"""The paper's Fig. 6, latency variability: ``python -m loadtest bench fig6 [--quick] [--out DIR]``.

Three regions, N. California, Oregon and Ireland (Table 1 latencies), with two single-serializer
trees: T1 in Oregon (the best under normal conditions) and T2 in Ireland. While each runs (and
``eventual``, the reference), the N. California-Oregon link (10 ms) gets extra latency at run
time through the WAN emulation's control file (every message between the two sites, bulk and
labels alike), stepping through ``--delays``; at each step every region writes paced probes and
the regions' visibility histograms are read. Prints, per injected delay, each tree's extra
visibility over ``eventual`` at the same delay (mean over the six pairs) and which tree wins;
writes ``fig6.json`` and a PNG like the paper's, ``fig6.png``, under ``--out``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.check.nemesis import write_wan_control
from loadtest.harness.cluster import find_base_port, with_overrides
from loadtest.harness.comparison import rows_of
from loadtest.harness.experiment import PASSED, Experiment, Paper
from loadtest.harness.metrics import scrape_visibility
from loadtest.harness.options import non_negative, positive
from loadtest.harness.plots import plt, save
from loadtest.harness.probes import Prober, merged, wait_flowing
from loadtest.harness.report import num, render_table, say, write_rows
from loadtest.harness.stats import to_ms
from services.launcher.cluster import Cluster
from services.topology import Topology

TABLE_1 = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region.toml"
SITES = {"california": "NC", "oregon": "O", "ireland": "I"}
VARIED = ("NC", "O")  # the link whose latency is raised
TREES = {"T1": "O", "T2": "I"}  # the single serializer's site
SPIKE_S = 3600.0  # a raise lasts until the next step replaces it


@dataclass
class Step:
    configuration: str  # eventual, T1 or T2
    delay_ms: float  # injected on the N. California-Oregon link
    updates: int
    mean_ms: float | None  # visibility, mean over every pair's updates
    extra_ms: float | None = None  # over eventual at the same delay (trees only)


def topology(configuration: str) -> Topology:
    """The three regions with Table 1's latencies; a tree's single serializer at its site."""
    table = Topology.load(TABLE_1)
    sites = SITES.values()
    latency = {a: {b: table.latency_ms_between(a, b) for b in sites if b > a} for a in sites}
    data = {
        "name": f"fig6-{configuration.lower()}",
        "protocol": "eventual" if configuration == "eventual" else "saturn",
        "latency_ms": {a: row for a, row in latency.items() if row},
        "regions": [{"name": name, "site": site} for name, site in SITES.items()],
    }
    if configuration in TREES:
        data["serializers"] = [{"name": "s", "site": TREES[configuration]}]
        data["tree"] = [{"a": name, "b": "s"} for name in SITES]
    made = Topology.from_dict(data)
    return with_overrides(made, base_port=find_base_port(made))


def raise_latency(cluster: Cluster, extra_ms: float) -> None:
    """Every message between the two varied sites pays ``extra_ms`` more from now on."""
    now = time.time()
    spike = {"sites": list(VARIED), "extra_ms": extra_ms, "from": now, "until": now + SPIKE_S}
    write_wan_control(cluster, {"spikes": [spike] if extra_ms else []})


def measure(configuration: str, delays: list[float], rate: float, seconds: float) -> list[Step]:
    steps = []
    with tempfile.TemporaryDirectory() as scratch:
        cluster = Cluster(topology(configuration), Path(scratch), wan_control=True)
        say(f"[{configuration}] starting {cluster.topology.name} ...")
        with cluster, Prober(cluster.topology, rate):
            wait_flowing(cluster.topology)
            for delay in delays:
                raise_latency(cluster, delay)
                time.sleep(1.0)  # messages sent before the change have left the links
                then = scrape_visibility(cluster.topology)
                time.sleep(seconds)
                seen = merged(scrape_visibility(cluster.topology), then)
                steps.append(Step(configuration, delay, int(seen.count), to_ms(seen.mean)))
                say(f"[{configuration}] +{delay:g} ms on NC-O: {int(seen.count)} updates, mean visibility "
                    f"{num(to_ms(seen.mean))} ms")  # fmt: skip
    return steps


def with_extra(steps: list[Step]) -> list[Step]:
    reference = {s.delay_ms: s.mean_ms for s in steps if s.configuration == "eventual"}
    for step in steps:
        base = reference.get(step.delay_ms)
        if step.configuration != "eventual" and step.mean_ms is not None and base is not None:
            step.extra_ms = step.mean_ms - base
    return steps


def table(steps: list[Step]) -> str:
    by = {(s.configuration, s.delay_ms): s for s in steps}
    rows = []
    for delay in sorted({s.delay_ms for s in steps}):
        t1, t2 = by[("T1", delay)].extra_ms, by[("T2", delay)].extra_ms
        best = "-" if t1 is None or t2 is None else ("T1" if t1 <= t2 else "T2")
        eventual = by[("eventual", delay)].mean_ms
        rows.append([f"+{delay:g}", num(eventual), num(t1, sign=True), num(t2, sign=True), best])
    return render_table(
        "Fig. 6: extra visibility over eventual (6 pairs' mean), latency injected on N. California-Oregon",
        ["injected ms", "eventual mean ms", "T1 (Oregon) extra", "T2 (Ireland) extra", "better"],
        rows,
    )


def plot(steps: list[Step], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for name, colour in (("T1", "#1f77b4"), ("T2", "#ff7f0e")):
        points = sorted(
            (s.delay_ms, s.extra_ms) for s in steps if s.configuration == name and s.extra_ms is not None
        )
        ax.plot([d for d, _ in points], [e for _, e in points], "o-", color=colour,
                label=f"{name}: serializer in {'Oregon' if name == 'T1' else 'Ireland'}")  # fmt: skip
    ax.set_xlabel("injected delay on N. California-Oregon (ms)")
    ax.set_ylabel("extra visibility over eventual (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path, dpi=120)


def delays(text: str) -> list[float]:
    """An argparse type: comma-separated milliseconds, zero allowed (``0,25,50``)."""
    values = [non_negative(part.strip()) for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError("an empty list")
    return values


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--delays",
        type=delays,
        default="0,25,50,75,100,125",
        help="injected ms, comma-separated (default: 0,25,50,75,100,125)",
    )
    parser.add_argument(
        "--rate", type=positive(float), default=20.0, help="probe writes per second per region (default: 20)"
    )


def run(args: argparse.Namespace) -> int:
    seconds = 2.0 if args.quick else 6.0
    steps: list[Step] = []
    for configuration in ("eventual", "T1", "T2"):
        steps += measure(configuration, args.delays, args.rate, seconds)
    steps = with_extra(steps)
    print(table(steps))
    write_rows(args.out, "fig6", steps)
    plot(steps, Path(args.out) / "fig6.png")
    say(f"wrote {Path(args.out) / 'fig6.png'}")
    return PASSED


# -- the paper's Fig. 6 beside this run (python -m loadtest paper fig6) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    steps = {(s["configuration"], s["delay_ms"]): s for s in rows_of(out / "fig6.json")}
    delays = sorted({d for _, d in steps})
    cost = {
        d: steps["T1", d]["extra_ms"] - steps["T1", 0.0]["extra_ms"] for d in delays if ("T1", d) in steps
    }
    crossover = next((d for d in delays if steps["T2", d]["extra_ms"] < steps["T1", d]["extra_ms"]), None)
    table = [
        ["extra visibility of T1 added by +25 ms (ms)", "14", num(cost.get(25.0), sign=True)],
        ["T2 wins from (injected ms)", "past 55", "never" if crossover is None else f"{crossover:g}"],
    ]
    matches = crossover is not None and crossover > 25
    verdict = (
        f"Shape {'matches' if matches else 'differs'}: the tree that is best "
        "at rest pays for a slower link on every pair whose label path crosses it, and the other tree wins "
        f"{'from +' + format(crossover, 'g') + ' ms' if crossover is not None else 'at no step measured'} "
        "(the paper: past +55 ms)."
    )
    return table, verdict


EXPERIMENT = Experiment(
    name="fig6",
    summary="Saturn Fig. 6: a link made slower at run time, and which of two trees then shows updates sooner",
    minutes=(3.0, 6.0),
    run=run,
    arguments=arguments,
    shared={"quick": "2 s per step instead of 6", "out": "bench-results/fig6"},
    paper=Paper(compare),
    about=__doc__ or "",
)
