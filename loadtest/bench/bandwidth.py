"""Links with a bandwidth, measured: ``python -m loadtest bench bandwidth [--quick] [--out DIR]``.

On two-region (sites A and B, 20 ms one way) with the link at each bandwidth of ``--mbit``:

- **rate**: a flood through the relay's flood port for ``--seconds``; what left the link per
  second against the setting (the target: within 10 %), and two floods at once, which must share
  the one capacity (their sum, not each, near the setting);
- **priority**: round trips of small calls from A to B's store during a flood, as critical
  metadata (the ``meta`` class: attaches, claims) and as data, on a FIFO link and on one with
  ``priority = true``: a FIFO link makes both wait behind the flood (up to its buffer, one
  second of the link's capacity); with priority, metadata crosses as if the link were idle.

Writes ``bandwidth.json`` and ``bandwidth.png``.
"""

from __future__ import annotations

import argparse
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.harness.cluster import find_base_port, started, with_bandwidth, with_overrides
from loadtest.harness.experiment import PASSED, Experiment
from loadtest.harness.options import numbers, positive
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, publish, render_table, say
from loadtest.harness.stats import Latency
from services.topology import Topology
from services.wan.flood import flood
from services.wan.routes import flood_endpoint

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "two-region.toml"
PING_EVERY_S = 0.05


@dataclass
class RateRow:
    mbit: float
    floods: int
    measured_mbit: float  # all floods together
    ratio: float


@dataclass
class PriorityRow:
    mbit: float
    priority: bool
    cls: str  # "meta" or "data"
    idle_p50_ms: float | None
    flooded_p50_ms: float | None
    flooded_max_ms: float | None


def _connection(address: str):
    """A store connection through ``address``, made (and authenticated) before any flood: a
    connection's handshake is round trips of its own."""
    from causal_client import direct
    from causal_client.credentials import client_password
    from services import auth

    secret = auth.secret()
    conn = direct.connect(address, client_password(secret) if secret else None, timeout=30.0)
    conn.ping()
    return conn


def _pings(conn, seconds: float) -> list[float]:
    """Round trips (ms) of PING on ``conn`` for ``seconds``."""
    times = []
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        began = time.perf_counter()
        conn.ping()
        times.append(1000 * (time.perf_counter() - began))
        time.sleep(PING_EVERY_S)
    return times


def _floods(endpoint: str, count: int, seconds: float) -> list:
    """``count`` floods at once through one link."""
    results: list = [None] * count

    def one(i: int) -> None:
        results[i] = flood(endpoint, seconds)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def measure(
    mbit: float, priority: bool, seconds: float, out: Path
) -> tuple[list[RateRow], list[PriorityRow]]:
    topology = with_bandwidth(Topology.load(TOPOLOGY), mbit, priority)
    topology = with_overrides(topology, base_port=find_base_port(topology))
    rates, rows = [], []
    with started(topology, out / f"run-{mbit:g}-{'priority' if priority else 'fifo'}"):
        endpoint = flood_endpoint(topology, "A", "B")
        store = topology.store_endpoints("b")[0]
        via = {cls: topology.relays.route("A", store, cls) for cls in ("meta", "data")}
        conns = {cls: _connection(address) for cls, address in via.items()}
        idle = {cls: _pings(conn, 1.0) for cls, conn in conns.items()}
        if not priority:  # the rate does not depend on it: measured once per bandwidth
            for floods in (1, 2):
                results = _floods(endpoint, floods, seconds)
                delivered = sum(r.delivered for r in results)
                took = max(r.last for r in results) - min(r.first for r in results)
                measured = delivered * 8 / took / 1e6
                rates.append(RateRow(mbit, floods, measured, measured / mbit))
                say(f"[{mbit:g} Mbit/s] {floods} flood(s): {measured:.2f} Mbit/s ({measured / mbit:.3f})")
        background = threading.Thread(target=flood, args=(endpoint, seconds + 1.0), daemon=True)
        background.start()
        time.sleep(1.0)  # the link's buffer fills
        flooded: dict[str, list[float]] = {}
        pingers = [
            threading.Thread(target=lambda c=c, x=x: flooded.__setitem__(c, _pings(x, seconds - 1.0)))
            for c, x in conns.items()
        ]
        for thread in pingers:
            thread.start()
        for thread in pingers:
            thread.join()
        background.join()
        for conn in conns.values():
            conn.close()
        for cls in via:
            quiet, loaded = Latency.of(idle[cls]), Latency.of(flooded.get(cls) or [])
            rows.append(PriorityRow(mbit, priority, cls, quiet.p50_ms, loaded.p50_ms, loaded.max_ms))
            row = rows[-1]
            say(f"[{mbit:g} Mbit/s, {'priority' if priority else 'FIFO'}] {cls}: p50 {num(row.idle_p50_ms)} "
                f"ms idle, {num(row.flooded_p50_ms)} flooded (max {num(row.flooded_max_ms)})")  # fmt: skip
    return rates, rows


def table(rates: list[RateRow], rows: list[PriorityRow]) -> str:
    first = render_table(
        "rate: what left the link per second (target: within 10 % of the setting)",
        ["setting Mbit/s", "floods", "measured Mbit/s", "measured / setting"],
        [[f"{r.mbit:g}", str(r.floods), num(r.measured_mbit, 2), num(r.ratio, digits=3)] for r in rates],
    )
    second = render_table(
        "round trips A→B's store while A→B is flooded (ms)",
        ["Mbit/s", "link", "class", "idle p50", "flooded p50", "flooded max"],
        [[f"{r.mbit:g}", "priority" if r.priority else "FIFO", r.cls, num(r.idle_p50_ms),
          num(r.flooded_p50_ms), num(r.flooded_max_ms)] for r in rows],
    )  # fmt: skip
    return f"{first}\n\n{second}"


def plot(rates: list[RateRow], rows: list[PriorityRow], path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for floods, marker in ((1, "o"), (2, "s")):
        mine = [r for r in rates if r.floods == floods]
        left.plot([r.mbit for r in mine], [r.measured_mbit for r in mine], marker, label=f"{floods} flood(s)")
    top = max((r.mbit for r in rates), default=1)
    left.plot([0, top], [0, top], "k:", label="the setting")
    left.fill_between([0, top], [0, 0.9 * top], [0, 1.1 * top], color="grey", alpha=0.15, label="±10 %")
    left.set_xlabel("link bandwidth setting (Mbit/s)")
    left.set_ylabel("measured (Mbit/s)")
    left.set_title("rate through the relay")
    left.legend()
    labels = [f"{r.mbit:g} Mbit/s\n{'priority' if r.priority else 'FIFO'}\n{r.cls}" for r in rows]
    right.bar(range(len(rows)), [r.flooded_p50_ms or 0 for r in rows], color=[
        "#2ca02c" if r.cls == "meta" else "#d62728" for r in rows])  # fmt: skip
    right.plot(range(len(rows)), [r.idle_p50_ms or 0 for r in rows], "k_", markersize=20, label="idle p50")
    right.set_xticks(range(len(rows)), labels, fontsize=7)
    right.set_yscale("log")
    right.set_ylabel("round trip p50 under a flood (ms, log)")
    right.set_title("metadata (green) and data (red) behind a flood")
    right.legend()
    save(fig, path)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mbit", type=numbers(float), default=None,
        help="comma-separated bandwidths (default: 4,16,64; --quick: 8,32)",
    )  # fmt: skip
    parser.add_argument(
        "--seconds", type=positive(float), default=None, help="flood length (default: 5; --quick: 3)"
    )


def run(args: argparse.Namespace) -> int:
    settings = args.mbit or ([8.0, 32.0] if args.quick else [4.0, 16.0, 64.0])
    seconds = args.seconds or (3.0 if args.quick else 5.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rates: list[RateRow] = []
    rows: list[PriorityRow] = []
    for mbit in settings:
        for priority in (False, True):
            more_rates, more_rows = measure(mbit, priority, seconds, out)
            rates += more_rates
            rows += more_rows
    publish(out, "bandwidth", [*rates, *rows], table(rates, rows), lambda path: plot(rates, rows, path))
    return PASSED


EXPERIMENT = Experiment(
    name="bandwidth",
    summary="links with a bandwidth: the rate through the relay, metadata and data behind a flood",
    minutes=(2.0, 3.0),
    run=run,
    arguments=arguments,
    shared={"quick": "two bandwidths (8,32), 3 s floods", "out": "bench-results/bandwidth"},
    about=__doc__ or "",
)
