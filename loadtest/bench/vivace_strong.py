"""Twissandra's strong variant as Vivace ran it (its §6.4), and the register under congestion:
``python -m loadtest bench vivace-strong [--quick] --out DIR`` (also part of ``paper vivace``).

Vivace kept Twissandra's account settings and tweets in read/write registers and its follower
lists and timelines in read-modify-write ones, on two sites whose every operation crossed the one
link between them, and measured, one request at a time: (R1) post a tweet, (R2) read a user's
tweets, (R3) read the home (friends') timeline, with the link congested, its algorithms' critical
messages in FIFO order against prioritised.

Here: the first two regions of the paper's EC2 topology (every register at both, so every strong
operation needs both), every link at ``--mbit`` through the relays, three conditions as
``bench vivace``'s (none; FIFO with both directions flooded; priority with the same flood). A client
at the first region runs ``--requests`` (or as many as fit ``--budget`` seconds: a FIFO queue behind
a flood makes each crossing take a second) of each of R1-R3 (R1: the tweet written, prepended to the
author's userline and to each follower's timeline; R2, R3: the list read, then each of its newest
``PAGE`` tweets), then the register's read and write alone, with the §3.4 fast path (a read
skips its write-back when a majority reported the newest timestamp) and without. Writes
``vivace_strong.json`` and ``vivace_strong.png``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from causal_client import CausalClient, CausalError, Prepend
from causal_client.strong import StrongRegisters
from loadtest.bench.synthetic_family import first_regions
from loadtest.bench.vivace_family import VIVACE
from loadtest.harness.cluster import clients_at_sites, find_base_port, started, with_bandwidth, with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.plots import LINK_COLOURS, plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.harness.stats import Latency
from services.topology import Topology
from services.wan.flood import flood
from services.wan.routes import flood_endpoint

BASE = Path(__file__).resolve().parents[2] / "topologies" / "ec2-7region.toml"
CONDITIONS = ("none", "fifo", "priority")
REQUESTS = {"R1 post": "post", "R2 a user's tweets": "userline", "R3 home timeline": "timeline"}
REGISTER = ("write", "read (fast path)", "read (write-back always)")
NS = "twissandra"
USERS, FOLLOWERS, PAGE = 8, 3, 5
TARGET = 1.5  # with priority, strong operations under congestion within this of uncongested


@dataclass
class Result:
    condition: str
    latency: dict[str, Latency] = field(default_factory=dict)  # request or register operation -> figures
    errors: int = 0


class StrongTwissandra:
    """Twissandra's data on strong registers (Vivace's mapping): accounts and tweets read/write,
    follower lists and timelines read-modify-write (a prepend)."""

    def __init__(self, registers: StrongRegisters, region: str):
        self.registers, self.region = registers, region
        self.ids = itertools.count()

    def setup(self, users: int, followers: int) -> None:
        for u in range(users):
            self.registers.write(self.region, NS, f"account:u{u}", f"settings of u{u}")
            fans = " ".join(f"u{(u + k) % users}" for k in range(1, followers + 1))
            self.registers.write(self.region, NS, f"followers:u{u}", fans)

    def post(self, user: str) -> None:
        tweet = f"t{time.time_ns()}-{next(self.ids)}"
        self.registers.write(self.region, NS, f"tweet:{tweet}", f"a tweet by {user}")
        self.registers.execute(self.region, NS, f"userline:{user}", Prepend(tweet))
        fans = self.registers.read(self.region, NS, f"followers:{user}").value or ""
        for fan in fans.split():
            self.registers.execute(self.region, NS, f"timeline:{fan}", Prepend(tweet))

    def page(self, row: str) -> list[str | None]:
        ids = (self.registers.read(self.region, NS, row).value or "").split()[:PAGE]
        return [self.registers.read(self.region, NS, f"tweet:{t}").value for t in ids]


def run_condition(condition: str, mbit: float, requests: int, budget_s: float, work: Path) -> Result:
    base = Topology.load(BASE)
    subset = Topology.load(first_regions(base, 2, work / f"vivace-strong-{condition}.toml"))
    topology = with_bandwidth(with_overrides(subset, protocol="saturn"), mbit, condition == "priority")
    topology = with_overrides(topology, base_port=find_base_port(topology))
    near, far = topology.region_names
    a, b = topology.region(near).site, topology.region(far).site
    result = Result(condition)
    with (
        started(topology, work / f"run-{condition}") as cluster,
        clients_at_sites(cluster.topology) as clients,
    ):
        client: CausalClient = clients[near]
        # Vivace's write as published (no query before stamping: its clocks are one machine's)
        fast = StrongRegisters(client, clock_safe=False)
        slow = StrongRegisters(client, fast_paths=False, clock_safe=False)
        app = StrongTwissandra(fast, near)
        app.setup(USERS, FOLLOWERS)
        for u in range(USERS):
            app.post(f"u{u}")  # every list holds something to read
        stop = threading.Event()
        floods = []
        if condition != "none":
            for x, y in ((a, b), (b, a)):
                endpoint = flood_endpoint(cluster.topology, x, y)
                thread = threading.Thread(target=flood, args=(endpoint, 3600, stop), daemon=True)
                thread.start()
                floods.append(thread)
            time.sleep(1.5)  # the links' buffers fill
        try:
            took: dict[str, list[float]] = {name: [] for name in [*REQUESTS, *REGISTER]}
            actions = {
                "R1 post": lambda n: app.post(f"u{n % USERS}"),
                "R2 a user's tweets": lambda n: app.page(f"userline:u{n % USERS}"),
                "R3 home timeline": lambda n: app.page(f"timeline:u{n % USERS}"),
                "write": lambda n: fast.write(near, NS, "register", str(n)),
                "read (fast path)": lambda n: fast.read(near, NS, "register"),
                "read (write-back always)": lambda n: slow.read(near, NS, "register"),
            }
            for name, action in actions.items():
                deadline = time.monotonic() + budget_s
                for n in range(requests):
                    if time.monotonic() > deadline:
                        say(
                            f"  [{condition}] {name}: {n} of {requests} requests in the {budget_s:g} s budget"
                        )
                        break
                    began = time.perf_counter()
                    try:
                        action(n)
                    except CausalError as exc:  # a failed request is counted, and said
                        result.errors += 1
                        say(f"  [{condition}] {name} failed: {type(exc).__name__}: {exc}")
                        continue
                    took[name].append(1000 * (time.perf_counter() - began))
                result.latency[name] = Latency.of(took[name])
                figures = result.latency[name]
                say(f"  [{condition}] {name}: p50 {num(figures.p50_ms)} ms, p90 {num(figures.p90_ms)}, "
                    f"max {num(figures.max_ms)} ({figures.count})")  # fmt: skip
        finally:
            stop.set()
            fast.close()
            slow.close()
            for thread in floods:
                thread.join(30)
    return result


def table(results: list[Result]) -> str:
    names = [*REQUESTS, *REGISTER]
    rows = []
    for r in results:
        cells = [
            f"{num(f.p50_ms)} / {num(f.p90_ms)} / {num(f.max_ms)}" if (f := r.latency.get(n)) else "-"
            for n in names
        ]
        rows.append([r.condition, *cells, str(r.errors)])
    heads = ["congestion", *(f"{n} p50 / p90 / max ms" for n in names), "errors"]
    lines = [
        render_table(
            "Twissandra on strong registers, two regions, every operation across the link", heads, rows
        )
    ]
    calm = next((r for r in results if r.condition == "none"), None)
    best = next((r for r in results if r.condition == "priority"), None)
    if calm and best:
        for name in names:
            c, p = calm.latency.get(name), best.latency.get(name)
            if c and p and c.p50_ms and p.p50_ms:
                ratio = p.p50_ms / c.p50_ms
                verdict = "meets" if ratio <= TARGET else "misses"
                lines.append(f"{name}: with priority under congestion {ratio:.2f}x uncongested (p50): "
                             f"{verdict} the {TARGET}x target")  # fmt: skip
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> None:
    names = [*REQUESTS, *REGISTER]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / max(1, len(results))
    for i, r in enumerate(results):
        xs = [k + i * width for k in range(len(names))]
        figures = [r.latency.get(n) for n in names]
        ax.bar(xs, [f.p50_ms or 0 if f else 0 for f in figures], width, color=LINK_COLOURS[r.condition],
               label=f"{r.condition} (median)")  # fmt: skip
        ax.plot(xs, [f.max_ms or 0 if f else 0 for f in figures], "v", color=LINK_COLOURS[r.condition],
                label=f"{r.condition} (max)")  # fmt: skip
    ax.set_xticks([k + 0.4 - width / 2 for k in range(len(names))], names, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.set_title("Twissandra on strong registers, the two regions' link flooded (Vivace §6.4)")
    ax.legend(fontsize=7, ncol=3)
    save(fig, path)


def load_results(out: Path) -> list[Result]:
    results = []
    for row in json.loads((out / "vivace_strong.json").read_text()):
        latency = {k: Latency(**v) for k, v in row.pop("latency").items()}
        results.append(Result(**row, latency=latency))
    return results


def conditions(text: str) -> list[str]:
    """An argparse type: comma-separated, some of none,fifo,priority."""
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    if not chosen or not set(chosen) <= set(CONDITIONS):
        raise argparse.ArgumentTypeError(f"some of {', '.join(CONDITIONS)}, got {text!r}")
    return chosen


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--requests", type=positive(int), help="requests of each kind and condition (default: 200; quick 30)")
    add(
        "--budget",
        type=positive(float),
        help="seconds for each kind and condition at most (default 90; quick 20)",
    )
    add("--mbit", type=positive(float), default=20.0, help="the link's bandwidth (default: 20)")
    add(
        "--conditions",
        type=conditions,
        default=",".join(CONDITIONS),
        help="comma-separated, of none,fifo,priority",
    )


def run(args: argparse.Namespace) -> int:
    requests = args.requests or (30 if args.quick else 200)
    budget = args.budget or (20.0 if args.quick else 90.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    under = ", ".join(args.conditions)
    say(f"Twissandra on strong registers: {requests} requests of each kind, under {under}")
    with tempfile.TemporaryDirectory() as scratch:
        results = [run_condition(c, args.mbit, requests, budget, Path(scratch)) for c in args.conditions]
    publish(out, "vivace_strong", results, table(results), lambda path: plot(results, path))
    return PASSED


# -- Vivace's figures beside this run (python -m loadtest paper vivace) ---------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    if not (out / "vivace_strong.json").exists():
        return [], "- Twissandra's strong variant was not run."
    results = {r.condition: r for r in load_results(out)}

    def figures(condition: str, name: str) -> str:
        f = results[condition].latency.get(name) if condition in results else None
        return f"{num(f.p50_ms)} / {num(f.max_ms)} ms" if f else "not measured"

    rows = []
    for name, ((slow_p50, slow_max), (fast_p50, fast_max)) in VIVACE.items():
        rows.append([f"strong Twissandra {name}, congested FIFO (p50 / max)", f"{slow_p50} / {slow_max} s",
                     figures("fifo", name)])  # fmt: skip
        rows.append([f"strong Twissandra {name}, congested with priority", f"{fast_p50} / {fast_max} s",
                     figures("priority", name)])  # fmt: skip
        rows.append([f"strong Twissandra {name}, uncongested", "(not in Vivace)", figures("none", name)])
    for name in REGISTER:
        for condition in CONDITIONS:
            rows.append([f"register {name}, {condition} (p50 / max)", "(Vivace Fig. 7: shapes)",
                         figures(condition, name)])  # fmt: skip
    verdict = []
    calm, best = results.get("none"), results.get("priority")
    if calm and best:
        for name in [*REQUESTS, *REGISTER]:
            c, p = calm.latency.get(name), best.latency.get(name)
            if c and p and c.p50_ms and p.p50_ms:
                within = "within" if p.p50_ms <= TARGET * c.p50_ms else "not within"
                verdict.append(f"- {name}: with priority under congestion {within} {TARGET}x of uncongested "
                               f"({p.p50_ms:.0f} against {c.p50_ms:.0f} ms p50).")  # fmt: skip
    verdict.append(
        "- Every strong operation here needs both regions, as Vivace's did: its timestamps cross the flooded "
        "link in the critical class, its values in the bulk class behind the flood (a read finds the value "
        "at its own region when the writer's background copy arrived, else waits for it from the other)."
    )
    return rows, "\n".join(verdict)


EXPERIMENT = Experiment(
    name="vivace-strong",
    summary="Twissandra on strong registers as Vivace ran it, its link flooded: FIFO against priority",
    minutes=(5.0, 18.0),
    run=run,
    arguments=arguments,
    shared={"quick": "30 requests of each kind (default: 200, as Vivace), 20 s a kind at most", "out": None},
    comparison=compare,  # beside Vivace's figures, where ``paper vivace`` runs it (Paper.then)
    about=__doc__ or "",
)
