"""How long every pair of regions shows no new updates, or shows them late, after a master of a
region's Redis Cluster store is killed: ``python -m loadtest bench store-heal``.

Three regions whose stores are Redis Clusters (the topology's, default the demo's: three masters
with a replica each). Every region writes a probe row at a steady pace (on a shard the kill does
not hit, so that writes go on everywhere and what is measured is replication, not the origin's
availability), and every region reads every other region's probe row as often as it can; a
probe's visibility is the time from its write to the first read elsewhere that shows it (or a
later one: one session's writes appear in order). After a steady phase, the region's master of
shard 0 is killed, as ``--kill`` says: ``failover`` holds it down until its replica has taken its
place, then starts it again (it rejoins as the replica); ``restart`` lets the supervisor start it
again at once (it may be back before the cluster fails it over). Reported per pair, counted
from the kill: the probes' visibility before it (median) and the worst after it; when updates
flow again (the first probe held by the outage the kill began is shown) and when the pair
healed (the last one is: probes shown later than ``LATE_FACTOR`` times the pair's steady p99,
and at least ``LATE_FLOOR_S``, written less than ``EPISODE_GAP_S`` apart; late probes after
that outage are counted apart).
Between the two, a region drains what queued meanwhile. The target: updates flow again
between every pair within the cluster's node timeout plus ``HEAL_MARGIN_S``. ``--out`` also
writes JSON and a plot.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from causal_client import CausalClient, CausalError, ReadSpec
from loadtest.harness.cluster import find_base_port, started, with_overrides
from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment
from loadtest.harness.options import positive
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, render_table, say, write_rows
from services.launcher import store_cluster
from services.launcher.cluster import Cluster
from services.topology import Topology

GROUP = "all"
WRITE_EVERY_S = 0.02  # each region's probe pace
READ_EVERY_S = 0.01  # each region's reads of the others' probes
STEADY_S = 5.0  # before the kill
LATE_FACTOR = 3.0
LATE_FLOOR_S = 0.25
EPISODE_GAP_S = 0.5  # late probes written further apart than this are separate outages
HEAL_MARGIN_S = 3.0  # the target: healed within node timeout + this
CLIENT_TIMEOUT_S = 1.0


@dataclass
class Pair:
    origin: str
    destination: str
    steady_ms: float | None  # median visibility before the kill
    worst_ms: float | None  # the worst visibility of a probe written from 1 s before the kill on
    flowing_s: float  # from the kill to the first late probe shown: the stall is over (0: none)
    healed_s: float  # from the kill to the last late arrival of its outage (0: none was late)
    late_after: int  # late probes after that outage (a hiccup of the machine, not the kill's)


@dataclass
class Probes:
    """What one run saw: when each region wrote each probe, when each other region first showed it."""

    written: dict[str, list[float]] = field(default_factory=dict)  # origin → time of probe i
    seen: dict[tuple[str, str], list[tuple[float, int]]] = field(default_factory=dict)  # (o, d) → (t, newest)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def latencies(self, origin: str, destination: str) -> list[tuple[float, float]]:
        """(write time, seconds until visible) of every probe the destination showed."""
        written = self.written[origin]
        out, next_probe = [], 0
        for at, newest in self.seen.get((origin, destination), []):
            while next_probe <= newest and next_probe < len(written):
                out.append((written[next_probe], at - written[next_probe]))
                next_probe += 1
        return out


def probe_row(topology: Topology, region: str, avoid_shard: int) -> str:
    """A row of the region's group on a shard other than ``avoid_shard`` (where one exists)."""
    shards = topology.region(region).shards
    for i in range(10_000):
        row = f"heal:{region}:{i}"
        if shards == 1 or topology.shard_of(region, GROUP, row) != avoid_shard:
            return row
    raise AssertionError("unreachable")


def write_probes(client: CausalClient, region: str, row: str, probes: Probes, stop: threading.Event) -> None:
    session = client.session(region)
    written = probes.written.setdefault(region, [])
    while not stop.is_set():
        try:
            session.write(GROUP, row, {"v": str(len(written))})
            written.append(time.monotonic())  # (one writer per region: the list is its own)
        except CausalError:
            session = client.session(region, label=session.token)
        stop.wait(WRITE_EVERY_S)


def read_probes(
    client: CausalClient, region: str, rows: dict[str, str], probes: Probes, stop: threading.Event
) -> None:
    origins = [o for o in rows if o != region]
    specs = [ReadSpec(GROUP, rows[o], ("v",)) for o in origins]
    newest = dict.fromkeys(origins, -1)
    while not stop.is_set():
        try:
            found = client.session(region, auto_migrate=False).multi_read(specs)
        except CausalError:
            stop.wait(READ_EVERY_S)
            continue
        at = time.monotonic()
        for origin, row in zip(origins, found, strict=True):
            value = row.text("v")
            if value is not None and int(value) > newest[origin]:
                newest[origin] = int(value)
                with probes.lock:
                    probes.seen.setdefault((origin, region), []).append((at, newest[origin]))
        stop.wait(READ_EVERY_S)


def kill_master(cluster: Cluster, region: str, shard: int, kind: str) -> str:
    """Kills the region's master of ``shard``; ``failover``: held down until another node serves
    the shard, then started again. Returns what happened."""
    t = cluster.topology
    victim = store_cluster.master_of(t, region, shard, None)
    name = f"{region}.redis{victim}"
    if kind == "restart":
        cluster.processes[name].popen.kill()  # the supervisor starts it again
        return f"{name} killed, restarted by the supervisor"
    cluster.kill(name)
    began = time.monotonic()
    while time.monotonic() - began < 30:
        try:
            if store_cluster.master_of(t, region, shard, None) != victim:
                break
        except store_cluster.ClusterFormError:
            pass
        time.sleep(0.05)
    promoted = time.monotonic() - began
    cluster.restart(name)
    return f"{name} killed, its replica promoted after {promoted:.1f} s, then started again"


def one_run(
    topology: Topology, region: str, kind: str, after_s: float, run_dir: Path | None
) -> tuple[list[Pair], Probes, str]:
    """``run_dir``: where the cluster's files and logs stay (default: a temporary folder)."""
    shard = 0
    rows = {r: probe_row(topology, r, shard if r == region else -1) for r in topology.region_names}
    probes, stop = Probes(), threading.Event()
    scratch = tempfile.TemporaryDirectory(prefix="store-heal-")
    with scratch, started(topology, run_dir or Path(scratch.name)) as cluster:
        clients = [
            CausalClient.connect(topology.store_endpoints(r), timeout=CLIENT_TIMEOUT_S)
            for r in topology.region_names
        ]
        threads = [
            threading.Thread(target=work, args=(c, r, *extra, probes, stop), daemon=True)
            for c, r in zip(clients, topology.region_names, strict=True)
            for work, extra in ((write_probes, (rows[r],)), (read_probes, (rows,)))
        ]
        try:
            for thread in threads:
                thread.start()
            time.sleep(STEADY_S)
            say(f"killing {region}'s master of shard {shard} ({kind}) ...")
            killed_at = time.monotonic()
            what = kill_master(cluster, region, shard, kind)
            say(f"  {what}; watching for {after_s:.0f} s more ...")
            time.sleep(max(0.0, killed_at + after_s - time.monotonic()))
        finally:
            stop.set()
            for thread in threads:
                thread.join(10)
            for client in clients:
                client.close()
    pairs = [
        heal(probes, o, d, killed_at) for o in topology.region_names for d in topology.region_names if o != d
    ]
    return pairs, probes, what


def heal(probes: Probes, origin: str, destination: str, killed_at: float) -> Pair:
    """The pair's steady visibility, its worst after the kill, and when the kill's outage ended:
    the arrival of the last late probe of the run of late ones that the kill began (late probes
    written less than ``EPISODE_GAP_S`` apart belong to one run). A later hiccup of the machine
    is counted apart (``late_after``), not as the kill's."""
    latencies = probes.latencies(origin, destination)
    steady = sorted(s for at, s in latencies if at < killed_at - 1.0)
    written_after = [at for at in probes.written[origin] if at >= killed_at]
    if not steady or (written_after and not any(at >= killed_at for at, _ in latencies)):
        return Pair(origin, destination, None, None, float("inf"), float("inf"), 0)  # never again
    p99 = steady[min(len(steady) - 1, int(0.99 * len(steady)))]
    late = max(LATE_FLOOR_S, LATE_FACTOR * p99)
    after = [(at, s) for at, s in latencies if at >= killed_at - 1.0]
    late_ones = [(at, s) for at, s in after if s > late]
    episode: list[float] = []  # arrivals of the late probes of the kill's outage
    last_written, rest = None, 0
    for at, s in late_ones:
        if last_written is None or at - last_written <= EPISODE_GAP_S:
            episode.append(at + s)
            last_written = at
        else:
            rest += 1
    flowing, healed = (min(episode) - killed_at, max(episode) - killed_at) if episode else (0.0, 0.0)
    worst = 1000 * max((s for _, s in after), default=0.0)
    return Pair(origin, destination, 1000 * statistics.median(steady), worst, max(0.0, flowing), healed, rest)


def plot(probes: Probes, pairs: list[Pair], path: Path, title: str) -> None:
    """Each probe's visibility by when it was written, a colour per pair, the kill marked."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    start = min(ats[0] for ats in probes.written.values() if ats)
    for i, pair in enumerate(pairs):
        points = probes.latencies(pair.origin, pair.destination)
        name = f"{pair.origin}→{pair.destination}"
        label = f"{name} (flowing after {pair.flowing_s:.1f} s, in time after {pair.healed_s:.1f} s)"
        xs, ys = [at - start for at, _ in points], [1000 * s for _, s in points]
        ax.plot(xs, ys, ".", ms=2, color=f"C{i}", label=label)  # a colour per pair (not per protocol)
    ax.axvline(STEADY_S, color="black", linestyle="--", linewidth=1, label="master killed")
    ax.set_yscale("log")
    ax.set_xlabel("probe written at (s)")
    ax.set_ylabel("visible after (ms)")
    ax.set_title("\n".join(textwrap.wrap(title, 120)), fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    save(fig, path)


def run(args: argparse.Namespace) -> int:
    topology = with_overrides(Topology.load(args.topology), protocol=args.protocol)
    if topology.store.engine != "cluster" or topology.store.masters < 3 or topology.store.replicas < 1:
        raise BenchError(f"{topology.name}: needs Redis Cluster stores of 3+ masters with replicas")
    region = args.region or topology.region_names[0]
    if region not in topology.region_names:
        raise BenchError(f"no region {region!r} in {topology.name}")
    topology = with_overrides(topology, base_port=find_base_port(topology))
    run_dir = Path(args.out) / "cluster" if args.out else None  # its logs stay beside the results
    pairs, probes, what = one_run(topology, region, args.kill, args.after, run_dir)
    target = topology.store.node_timeout_ms / 1000 + HEAL_MARGIN_S
    title = (
        f"{topology.name} ({topology.protocol}): {what}; node timeout "
        f"{topology.store.node_timeout_ms} ms, target: flowing again within {target:.1f} s"
    )
    print(render_table(
        title, ["pair", "steady ms", "worst after ms", "flowing after s", "healed after s", "late later"],
        [[f"{p.origin} → {p.destination}", num(p.steady_ms), num(p.worst_ms, 0), num(p.flowing_s, 2),
          num(p.healed_s, 2), str(p.late_after)] for p in pairs],
    ))  # fmt: skip
    if args.out:
        write_rows(args.out, "store-heal", pairs)
        path = Path(args.out) / "store-heal.png"
        plot(probes, pairs, path, title)
        say(f"wrote {path}")
    missed = [p for p in pairs if p.flowing_s > target]
    if missed:
        say(f"target missed: {', '.join(f'{p.origin} → {p.destination}' for p in missed)}")
    return FAILED if missed else PASSED


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kill", choices=["failover", "restart"], default="failover",
        help="failover: the master held down until its replica took over, then started again; "
        "restart: the supervisor starts it again at once (default: failover)")  # fmt: skip
    parser.add_argument("--region", help="whose master is killed (default: the first region)")
    parser.add_argument("--after", type=positive(float), default=25.0,
        help="seconds watched after the kill (default: 25)")  # fmt: skip


EXPERIMENT = Experiment(
    name="store-heal",
    summary="a cluster store's master killed: how long until every pair of regions sees updates in time",
    minutes=(1.0, 1.0),
    run=run,
    arguments=arguments,
    shared={"topology": "topologies/demo-3region-cluster.toml", "protocol": "saturn", "out": ""},
    about=__doc__ or "",
)
