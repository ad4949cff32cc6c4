"""RedBlue's microbenchmark (OSDI'12 §7.2, Figures 8 and 9) on this system, for both ways of
ordering red operations: ``python -m loadtest bench redblue [--quick] --out DIR``.

- **latency** (its Fig. 8): on the first ``k`` of the paper's seven EC2 regions, ``k`` = 2 to 7,
  a client at every region issues requests one at a time at a user's pace (``--think-ms``), all
  regions at once: red ones (a compare-and-set of a register, as Chirp's pins) and blue ones (a
  causal write, as a like).
  Mean, median, p90 and max per colour, for red by Vivace's registers (``[strong] mode =
  "vivace"``: a round trip to the closest majority) and by Gemini's token (``"token"``: the
  regions hold it ``--hold-ms`` each in turn; Gemini's prototype held it a second).
- **throughput** (its Fig. 9): on the first two regions, closed-loop clients (``--clients`` per
  region, each number a point of the curve; split into a red and a blue set as the paper's users
  were) for ``--seconds`` each at 100 % blue, 70 % blue / 30 % red and 100 % red; requests per
  second against mean latency. Every region shares this machine's cores: a region waiting for
  the token leaves its share of them to the one holding it, which separate machines cannot do.

The clusters run Saturn (blue requests are causal writes, local in any causal protocol). Both
red modes run against the same cluster: each keeps its own registers (their gears are in every
store), and a client runs whichever it is given. Writes ``redblue.json`` and ``redblue.png``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from causal_client import CausalClient, CompareAndSet
from causal_client.strong import StrongRegisters
from causal_client.token import TokenRegisters
from loadtest.bench.synthetic_family import first_regions
from loadtest.harness.cluster import clients_at_sites, find_base_port, started, with_overrides
from loadtest.harness.experiment import PASSED, Experiment, Paper
from loadtest.harness.options import non_negative, numbers, positive
from loadtest.harness.plots import colour, plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.harness.stats import Latency
from services.topology import Topology

BASE = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region.toml"
MODES = ("vivace", "token")
MIXES = (0.0, 0.3, 1.0)  # the red share of the throughput runs' clients
NAMESPACE = "redblue"
BLUE = "#1f77b4"  # blue requests in the figures (red ones take their mode's colour)


@dataclass
class LatencyRow:
    regions: int
    blue: Latency
    red: dict[str, Latency] = field(default_factory=dict)  # mode -> its red requests' latency


@dataclass
class ThroughputRow:
    mode: str
    red_share: float
    clients: int  # closed loops a region
    per_s: float
    mean_ms: float | None
    red_per_s: float
    blue_per_s: float


def red_ops(client: CausalClient, mode: str, hold_ms: float) -> StrongRegisters | TokenRegisters:
    """The client's red operations in ``mode`` (whatever the deployment's default)."""
    return TokenRegisters(client, hold_ms) if mode == "token" else StrongRegisters(client)


def timed(operation: Callable[[], object]) -> float:
    began = time.perf_counter()
    operation()
    return (time.perf_counter() - began) * 1000


def latency_round(
    clients: dict[str, CausalClient], mode: str, hold_ms: float, requests: int, think_ms: float
) -> tuple[list[float], list[float]]:
    """Every region's client, at once: ``requests`` red and as many blue requests, alternating,
    one at a time, a random pause of up to twice ``think_ms`` after each pair (a user's pace: the
    red ones then fall anywhere in the token's turn). Returns (red, blue) latencies in ms."""
    red: list[float] = []
    blue: list[float] = []
    lock = threading.Lock()

    def one_region(region: str) -> None:
        client = clients[region]
        registers = red_ops(client, mode, hold_ms)
        session = client.session(region)
        key = f"{mode}-{region}-{time.time_ns()}"
        value = "0"
        rng = random.Random(key)
        try:
            for n in range(requests):
                command = CompareAndSet(value if n else None, str(n + 1))
                took_red = timed(lambda: registers.execute(region, NAMESPACE, key, command))  # noqa: B023 (called at once)
                value = str(n + 1)
                took_blue = timed(lambda: session.write("all", f"{key}-blue", {"n": str(n)}))  # noqa: B023
                with lock:
                    red.append(took_red)
                    blue.append(took_blue)
                time.sleep(rng.uniform(0, 2 * think_ms) / 1000)
        finally:
            registers.close()

    threads = [threading.Thread(target=one_region, args=(r,)) for r in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return red, blue


def measure_latency(
    counts: list[int], hold_ms: float, requests: int, think_ms: float, work: Path
) -> list[LatencyRow]:
    base = Topology.load(BASE)
    rows = []
    for k in counts:
        say(f"== latency on the first {k} regions of {base.name}")
        subset = Topology.load(first_regions(base, k, work / f"ec2-first-{k}.toml"))
        topology = with_overrides(subset, protocol="saturn")
        topology = with_overrides(topology, base_port=find_base_port(topology))
        with (
            started(topology, work / f"run-latency-{k}") as cluster,
            clients_at_sites(cluster.topology) as clients,
        ):
            row = LatencyRow(k, Latency())
            blue_all: list[float] = []
            for mode in MODES:
                red, blue = latency_round(clients, mode, hold_ms, requests, think_ms)
                row.red[mode] = Latency.of(red)
                blue_all += blue
                f = row.red[mode]
                say(f"  {k} regions, red by {mode}: mean {num(f.mean_ms)} ms, p90 {num(f.p90_ms)}; "
                    f"blue mean {num(statistics.fmean(blue))} ms")  # fmt: skip
            row.blue = Latency.of(blue_all)
        rows.append(row)
    return rows


@dataclass
class RedBlueRun:
    hold_ms: float
    latency: list[LatencyRow]
    throughput: list[ThroughputRow]


def throughput_run(
    clients: dict[str, CausalClient], mode: str, hold_ms: float, red_share: float, threads: int,
    seconds: float,
) -> ThroughputRow:  # fmt: skip
    """Closed loops: per region, ``threads`` clients, the first ``red_share`` of them red."""
    done = {"red": 0, "blue": 0}
    took: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()
    reds = round(threads * red_share)

    def loop(region: str, number: int) -> None:
        client = clients[region]
        colour = "red" if number < reds else "blue"
        registers = red_ops(client, mode, hold_ms) if colour == "red" else None
        session = client.session(region)
        key = f"{mode}-{region}-{number}-{time.time_ns()}"
        n = 0
        try:
            while not stop.is_set():
                if registers is not None:
                    command = CompareAndSet(str(n) if n else None, str(n + 1))
                    ms = timed(lambda: registers.execute(region, NAMESPACE, key, command))  # noqa: B023 (called at once)
                else:
                    ms = timed(lambda: session.write("all", key, {"n": str(n)}))  # noqa: B023
                n += 1
                if not stop.is_set():
                    with lock:
                        done[colour] += 1
                        took.append(ms)
        finally:
            if registers is not None:
                registers.close()

    workers = [threading.Thread(target=loop, args=(r, i)) for r in clients for i in range(threads)]
    for t in workers:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in workers:
        t.join()
    total = done["red"] + done["blue"]
    return ThroughputRow(
        mode, red_share, threads, total / seconds, statistics.fmean(took) if took else None,
        done["red"] / seconds, done["blue"] / seconds,
    )  # fmt: skip


def measure_throughput(hold_ms: float, loads: list[int], seconds: float, work: Path) -> list[ThroughputRow]:
    base = Topology.load(BASE)
    say(f"== throughput on the first 2 regions of {base.name}, {loads} clients a region")
    subset = Topology.load(first_regions(base, 2, work / "ec2-first-2-throughput.toml"))
    topology = with_overrides(subset, protocol="saturn")
    topology = with_overrides(topology, base_port=find_base_port(topology))
    rows: list[ThroughputRow] = []
    with started(topology, work / "run-throughput") as cluster, clients_at_sites(cluster.topology) as clients:
        for mode in MODES:
            for share in MIXES:
                for load in loads:
                    blue = [r for r in rows if r.red_share == 0.0 and r.clients == load]
                    if share == 0.0 and blue:  # all blue: the same in both modes
                        rows.append(ThroughputRow(**{**asdict(blue[0]), "mode": mode}))
                        continue
                    row = throughput_run(clients, mode, hold_ms, share, load, seconds)
                    rows.append(row)
                    say(f"  red by {mode}, {100 * share:.0f} % red, {load} clients a region: "
                        f"{row.per_s:,.0f} requests/s (mean {num(row.mean_ms)} ms)")  # fmt: skip
    return rows


def peak(throughput: list[ThroughputRow], mode: str, share: float) -> ThroughputRow | None:
    """The point of greatest throughput of one curve."""
    curve = [r for r in throughput if r.mode == mode and r.red_share == share]
    return max(curve, key=lambda r: r.per_s, default=None)


def table(latency: list[LatencyRow], throughput: list[ThroughputRow], hold_ms: float) -> str:
    lines = []
    for row in latency:
        cells = [str(row.regions), f"{num(row.blue.mean_ms)} / {num(row.blue.p90_ms)}"]
        for mode in MODES:
            f = row.red.get(mode, Latency())
            cells.append(f"{num(f.mean_ms)} / {num(f.p50_ms)} / {num(f.p90_ms)} / {num(f.max_ms, 0)}")
        lines.append(cells)
    heads = ["regions", "blue mean / p90 ms", "red by vivace mean / p50 / p90 / max ms",
             f"red by token ({hold_ms:g} ms) mean / p50 / p90 / max ms"]  # fmt: skip
    text = [
        render_table("RedBlue Fig. 8: request latency, every region at once, one at a time", heads, lines)
    ]
    rows = [
        [r.mode, f"{100 * (1 - r.red_share):.0f}:{100 * r.red_share:.0f}", str(r.clients), num(r.per_s, 0),
         num(r.mean_ms), num(r.blue_per_s, 0), num(r.red_per_s, 0)]
        for r in throughput
    ]  # fmt: skip
    heads = ["red by", "blue:red", "clients a region", "requests/s", "mean ms", "blue/s", "red/s"]
    text.append(render_table("RedBlue Fig. 9: closed-loop throughput on 2 regions", heads, rows))
    for mode in MODES:
        blue, red = peak(throughput, mode, 0.0), peak(throughput, mode, 1.0)
        if blue and red and red.per_s:
            text.append(f"red by {mode}: all blue peaks at {blue.per_s / red.per_s:.1f}x the throughput of "
                        "all red (RedBlue with its token: about 2x)")  # fmt: skip
    return "\n\n".join(text)


def plot(latency: list[LatencyRow], throughput: list[ThroughputRow], path: Path) -> None:
    colours = {"blue": BLUE, **{mode: colour(mode) for mode in MODES}}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    xs = [r.regions for r in latency]
    left.errorbar(
        xs, [r.blue.mean_ms or 0 for r in latency], fmt="o-", color=colours["blue"], label="blue (causal)"
    )
    for mode in MODES:
        means = [r.red[mode].mean_ms or 0 for r in latency]
        p90 = [r.red[mode].p90_ms or 0 for r in latency]
        left.plot(xs, means, "s-", color=colours[mode], label=f"red by {mode} (mean)")
        left.plot(xs, p90, "v:", color=colours[mode], label=f"red by {mode} (p90)")
    left.set_yscale("log")
    left.set_xlabel("regions")
    left.set_ylabel("latency, ms (log)")
    left.set_title("request latency (RedBlue Fig. 8)")
    left.legend(fontsize=8)
    styles = {0.0: "o-", 0.3: "s--", 1.0: "v:"}
    for mode in MODES:
        for share in MIXES:
            if share == 0.0 and mode != MODES[0]:
                continue  # all blue is one curve
            curve = sorted(
                (r for r in throughput if r.mode == mode and r.red_share == share), key=lambda r: r.clients
            )
            shade = colours["blue"] if share == 0.0 else colours[mode]
            name = "all blue" if share == 0.0 else f"{100 * (1 - share):.0f}:{100 * share:.0f}, red by {mode}"
            right.plot([r.per_s for r in curve], [r.mean_ms or 0 for r in curve], styles[share], color=shade,
                       label=name)  # fmt: skip
    right.set_yscale("log")
    right.set_xlabel("requests/s")
    right.set_ylabel("mean latency, ms (log)")
    right.set_title("closed-loop throughput against latency, 2 regions (RedBlue Fig. 9)")
    right.legend(fontsize=8)
    save(fig, path)


def region_counts(text: str) -> list[int]:
    """An argparse type: comma-separated region counts, each 2 to 7 (the first k of ec2-7region)."""
    try:
        counts = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"counts such as 2,4,7, got {text!r}") from None
    if not counts or not all(2 <= k <= 7 for k in counts):
        raise argparse.ArgumentTypeError(f"between 2 and 7 regions of ec2-7region, got {text!r}")
    return counts


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--hold-ms", type=positive(float), default=1000.0, help="the token's turn per region (default: 1000)")
    add("--requests", type=positive(int), help="red requests per region and point (default: 20; quick 6)")
    add(
        "--clients", type=numbers(int), help="closed-loop clients a region, a point each (default: 2,8,32; "
        "quick 4,16)"
    )  # fmt: skip
    add("--seconds", type=positive(float), help="each throughput run (default: 20; quick 8)")
    add("--think-ms", type=non_negative, default=250.0, help="a user's mean pause (default: 250)")
    add(
        "--regions",
        type=region_counts,
        help="comma-separated region counts, 2-7 (default: 2..7; quick 2,4,7)",
    )


def run(args: argparse.Namespace) -> int:
    counts = args.regions or ([2, 4, 7] if args.quick else [2, 3, 4, 5, 6, 7])
    requests = args.requests or (6 if args.quick else 20)
    seconds = args.seconds or (8.0 if args.quick else 20.0)
    loads = args.clients or ([4, 16] if args.quick else [2, 8, 32])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say(f"RedBlue's microbenchmark: latency on {counts} regions, throughput on 2; token turn {args.hold_ms:g}"
        " ms")  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        latency = measure_latency(counts, args.hold_ms, requests, args.think_ms, work)
        throughput = measure_throughput(args.hold_ms, loads, seconds, work)
    text = table(latency, throughput, args.hold_ms)
    results = RedBlueRun(args.hold_ms, latency, throughput)
    publish(out, "redblue", [results], text, lambda path: plot(latency, throughput, path))
    return PASSED


def load(out: Path) -> tuple[float, list[LatencyRow], list[ThroughputRow]]:
    (data,) = json.loads((out / "redblue.json").read_text())
    latency = [
        LatencyRow(r["regions"], Latency(**r["blue"]), {m: Latency(**f) for m, f in r["red"].items()})
        for r in data["latency"]
    ]
    return data["hold_ms"], latency, [ThroughputRow(**r) for r in data["throughput"]]


def compare(out: Path) -> tuple[list[list[str]], str]:
    """This run beside what survives of RedBlue's figures in its text (python -m loadtest paper redblue)."""
    hold_ms, latency, throughput = load(out)
    rows = []
    for r in latency:
        token, vivace = r.red.get("token", Latency()), r.red.get("vivace", Latency())
        wait = (r.regions - 1) * hold_ms
        rows.append([f"{r.regions} regions: red by token, mean / max ms",
                     f"4 of 5 at the closest site, every 5th waits (k-1) x 1 s = {wait / hold_ms:g} s",
                     f"{num(token.mean_ms)} / {num(token.max_ms, 0)}"])  # fmt: skip
        rows.append([f"{r.regions} regions: red by vivace, mean / max ms", "(not in RedBlue)",
                     f"{num(vivace.mean_ms)} / {num(vivace.max_ms, 0)}"])  # fmt: skip
        rows.append([f"{r.regions} regions: blue mean ms", "round trip to the closest site",
                     num(r.blue.mean_ms)])  # fmt: skip
    for mode in MODES:
        blue, mixed, red = (peak(throughput, mode, share) for share in MIXES)
        if blue and red and mixed and red.per_s:
            rows.append([f"peak throughput all blue / all red (red by {mode})", "about 2x (token)",
                         f"{blue.per_s / red.per_s:.1f}x"])  # fmt: skip
            between = f"{num(mixed.per_s, 0)} (blue {num(blue.per_s, 0)}, red {num(red.per_s, 0)})"
            rows.append([f"70:30 between the two (red by {mode})", "proportionally between", between])
    verdict = (
        "- Blue requests stay local at every size: their latency is the store's, not the WAN's.\n"
        "- Red by token: a request waits for its region's turn, so the mean and the spread grow with the "
        "regions (a full turn is regions x the hold); while its region holds the token a request costs no "
        "WAN at all. Red by Vivace's registers costs about one round trip to the closest majority, "
        "whatever the load, and survives a minority of regions down, where the token stops.\n"
        "- RedBlue's users sat at a distance from their closest site; here every client sits at its region, "
        "so blue latencies are local ones, and the figures compare shapes, not milliseconds. Both regions "
        "share one machine's cores: while one holds the token the other's idle share goes to it, so all red "
        "by token keeps more of the blue throughput than RedBlue's separate sites could."
    )
    return rows, verdict


EXPERIMENT = Experiment(
    name="redblue",
    summary="RedBlue's microbenchmark: red by Vivace's registers and by Gemini's token, against blue",
    minutes=(4.0, 9.0),
    run=run,
    arguments=arguments,
    shared={"quick": "2, 4 and 7 regions, fewer requests, shorter runs", "out": None},
    paper=Paper(compare),
    about=__doc__ or "",
)
