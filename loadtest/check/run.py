"""One checked run: start the topology (durable, supervised, with WAN fault control), run the
sessions with the nemesis for the duration, heal, let replication quiesce, check convergence and
the history, report."""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from causal_client import CausalClient
from loadtest.check import report
from loadtest.check.atomicity import check_atomicity
from loadtest.check.causal import check
from loadtest.check.convergence import check_convergence
from loadtest.check.history import History, write_ops
from loadtest.check.linearizable import check_linearizable
from loadtest.check.nemesis import OUTAGE_S, Nemesis
from loadtest.check.shard_probe import start_probes
from loadtest.check.strong_sessions import (
    StrongHistory,
    StrongSession,
    final_reads,
    register_keys,
    strong_history_path,
    write_strong_ops,
)
from loadtest.check.timeline import VisibilitySampler
from loadtest.check.workload import CheckedSession, Mix, hot_keys
from loadtest.harness.cluster import find_base_port, with_bandwidth, with_overrides, with_shards
from loadtest.workload.run import running_topology
from services.launcher.cluster import Cluster
from services.topology import Topology

CALL_TIMEOUT_S = 5.0  # a call to a region that hangs fails after this (then the session moves on)
PROGRESS_EVERY_S = 10.0


@dataclass
class CheckSettings:
    topology: Path
    protocol: str
    duration: float = 60.0
    sessions: int = 12
    keys_per_group: int = 6
    faults: list[str] = field(default_factory=list)
    interval_s: float = 6.0
    fault_s: float = 2.0
    seed: int = 1
    mix: Mix = field(default_factory=Mix)
    out: Path = Path("check-results")
    running: Path | None = None  # a deployment that runs already: its (client) topology.json here
    shards: int | None = None  # shards per region, instead of the topology's
    cluster_store: tuple[int, int] | None = None  # (masters, replicas): a Redis Cluster per region
    bandwidth_mbit: float | None = None  # every link's, instead of the topology's (congestion)
    priority: bool = False  # with bandwidth_mbit: critical metadata ahead of bulk data
    strong_sessions: int = 0  # sessions of strong operations beside the causal ones
    registers: int = 4  # the registers they work on
    strong_mode: str | None = None  # "vivace" or "token", instead of the topology's
    tls: bool = False  # every connection over TLS (the launcher makes the certificates)
    ops: int | None = None  # end once this many operations (causal and strong) are recorded, each fault done
    interrupted: threading.Event | None = None  # set (Ctrl-C): end now, check what was recorded
    history_file: Path | None = None  # where the history goes (.jsonl.gz), for checking again
    quiet: bool = False  # no report printed or written (a soak's segment: the soak reports)
    outage_s: float = OUTAGE_S  # how long region-outage keeps a region down
    on_progress: Callable[[int], None] | None = None  # told the operations recorded, twice a second


def run_check(settings: CheckSettings, say: Callable[[str], None]) -> dict:
    if settings.running is not None:
        _, topology = running_topology(settings.running)
        say(f"[{topology.protocol}] checking {topology.name} as it runs; faults come from outside")
        return checked_run(settings, topology, None, say)
    topology = topology_for(settings)
    with checked_cluster(topology, settings.out, say) as cluster:
        return checked_run(settings, topology, cluster, say)


@contextlib.contextmanager
def checked_cluster(topology: Topology, out: Path, say: Callable[[str], None]) -> Iterator[Cluster]:
    """The topology started fresh under ``out/cluster`` (supervised, with WAN fault control) for
    the block, stopped on the way out whatever happens."""
    cluster = Cluster(topology, out / "cluster", wan_control=True)
    say(f"[{topology.protocol}] starting {topology.name} (logs in {cluster.run_dir / 'logs'}) ...")
    cluster.start(fresh=True)
    try:
        yield cluster
    finally:
        say(f"[{topology.protocol}] stopping the cluster ...")
        cluster.stop()


def topology_for(settings: CheckSettings) -> Topology:
    """The topology file with the settings' protocol, shards, store, bandwidth, strong mode and
    TLS, on a free block of ports."""
    base = Topology.load(settings.topology)
    topology = with_overrides(base, protocol=settings.protocol)
    if settings.shards:
        topology = with_shards(topology, settings.shards)
    if settings.cluster_store:
        masters, replicas = settings.cluster_store
        store = {**topology.store.model_dump(), "engine": "cluster", "masters": masters, "replicas": replicas}
        topology = with_overrides(topology, store=store)
    if settings.bandwidth_mbit:
        topology = with_bandwidth(topology, settings.bandwidth_mbit, settings.priority)
    if settings.strong_mode:
        topology = with_overrides(
            topology, strong={**topology.strong.model_dump(), "mode": settings.strong_mode}
        )
    if settings.tls:
        topology = with_overrides(topology, tls=True)
    return with_overrides(topology, base_port=find_base_port(topology))


def checked_run(
    settings: CheckSettings, topology: Topology, cluster: Cluster | None, say: Callable[[str], None]
) -> dict:
    """The sessions, the nemesis (only with a cluster of our own), the checks. Keys and registers
    are the run's own, so runs one after another on one cluster are independent histories."""
    regions = topology.region_names
    groups = sorted(topology.group_members)
    keys = hot_keys(groups, settings.keys_per_group, run=f"{secrets.token_hex(3)}-")
    history, strong = History(), StrongHistory()
    registers = register_keys(settings.registers, run=keys[0][1].rpartition("k")[0])
    stop = threading.Event()
    phases = Phases()
    with CausalClient.connect(
        topology.store_endpoints(regions[0]),  # the first that answers
        timeout=CALL_TIMEOUT_S,
        endpoints=topology.client_endpoints(),
    ) as client:
        clock = time.monotonic()
        sessions: list[threading.Thread] = [
            CheckedSession(i, client, regions[i % len(regions)], keys, history, clock, stop, settings.mix,
                           settings.seed * 1000 + i)
            for i in range(settings.sessions)
        ]  # fmt: skip
        sessions += [
            StrongSession(i, client, regions, registers, strong, clock, stop, settings.seed * 1000 + 500 + i)
            for i in range(settings.strong_sessions)
        ]
        nemesis = Nemesis(
            cluster, settings.faults, clock, stop, settings.interval_s, settings.fault_s, settings.seed, say,
            settings.outage_s,
        )  # fmt: skip
        sampler = VisibilitySampler(topology, clock, stop)
        probes, probe_samples = (
            start_probes(client, topology, clock, stop) if "slow-shard" in nemesis.faults else ([], [])
        )
        say(
            f"[{topology.protocol}] {len(sessions)} sessions over {', '.join(regions)}, "
            f"{len(keys)} hot keys in {len(groups)} groups, {settings.duration:.0f} s; "
            f"faults: {', '.join(nemesis.faults) or 'none'}"
        )
        for thread in (*sessions, nemesis, sampler):
            thread.start()
        phases.lap("setup")
        _until_done(settings, clock, nemesis, history, strong, say)
        phases.lap("sessions")
        stop.set()
        for thread in sessions:
            thread.join(CALL_TIMEOUT_S * 4)
        nemesis.join(60)
        sampler.join(5)
        for probe in probes:
            probe.join(CALL_TIMEOUT_S * 2)
        nemesis.heal()
        phases.lap("stopping")
        say(f"[{topology.protocol}] {len(history.ops):,} operations; letting replication quiesce ...")
        convergence = check_convergence(client, history, keys, topology.group_members, say)
        if settings.strong_sessions:
            final_reads(client, regions, registers, strong, clock)
        phases.lap("quiescing")
    history.untyped += strong.untyped
    if settings.history_file is not None:
        write_ops(settings.history_file, history.ops)
        if strong.ops:  # beside it, to check its linearizability again
            write_strong_ops(strong_history_path(settings.history_file), strong.ops)
        phases.lap("writing")
    say(f"[{topology.protocol}] checking the history ...")
    result = check(history.ops)
    atomicity = check_atomicity(history.ops)
    run_settings = {
        "topology": topology.name, "protocol": topology.protocol, "duration": settings.duration,
        "sessions": settings.sessions, "keys": len(keys), "faults": nemesis.faults,
        "interval_s": settings.interval_s, "fault_s": settings.fault_s, "seed": settings.seed,
        "atomic_batches": settings.mix.atomic,
    }  # fmt: skip
    linearizability = check_linearizable(strong.ops) if settings.strong_sessions else None
    for problem in nemesis.errors:
        say(f"nemesis: {problem}")
    data = report.to_json(
        run_settings, history, result, convergence, nemesis.events, sampler.samples, atomicity, probe_samples
    )
    phases.lap("checking")
    data["strong_operations"] = len(strong.ops)
    data["nemesis_errors"] = nemesis.errors
    data["phase_seconds"] = phases.seconds
    if linearizability is not None:
        data |= report.linearizability_json(linearizability)
    if settings.quiet:
        return data
    text = report.text_report(run_settings, history, result, convergence, nemesis.events, atomicity)
    if linearizability is not None:
        text += report.linearizability_text(linearizability, strong.failures)
    if data["fault_effects"]:
        text += "\n" + report.fault_effects_text(data["fault_effects"])
    print(text, flush=True)
    for path in report.write(settings.out, data):
        say(f"wrote {path}")
    return data


class Phases:
    """Where a run's time went, phase by phase (the soak sums them: the cost before the cure)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._since = time.monotonic()

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.seconds[phase] = round(self.seconds.get(phase, 0.0) + now - self._since, 2)
        self._since = now


def _until_done(
    settings: CheckSettings,
    clock: float,
    nemesis: Nemesis,
    history: History,
    strong: StrongHistory,
    say: Callable[[str], None],
) -> None:
    """Waits out the run's duration (or, given ``ops``, until that many operations are
    recorded, causal and strong), and past it until the nemesis has done each of its faults once
    (healing them takes longer on a busy machine; a run that skipped a fault would check less
    than it was asked to), but never past twice the duration; at once when ``interrupted``.
    Progress every 10 s."""
    duration, wanted, interrupted = settings.duration, settings.ops, settings.interrupted
    ends, last_word = clock + duration, clock + 2 * duration

    def recorded() -> int:
        return len(history.ops) + len(strong.ops)

    def enough() -> bool:
        if wanted is not None:
            return recorded() >= wanted
        return time.monotonic() >= ends

    def done() -> bool:
        if interrupted is not None and interrupted.is_set():
            return True
        return time.monotonic() >= last_word or (enough() and nemesis.went_round.is_set())

    tick = 0.5 if wanted is not None or interrupted is not None else PROGRESS_EVERY_S
    overtime, said = False, time.monotonic()
    while not done():
        now = time.monotonic()
        if settings.on_progress is not None:
            settings.on_progress(recorded())
        if not enough():
            time.sleep(tick if wanted is not None else min(tick, max(ends - now, 0.05)))
        else:
            if not overtime:
                overtime = True
                say(f"  [{now - clock:6.1f}s] waiting for the nemesis to finish its last faults ...")
            nemesis.went_round.wait(min(tick, last_word - now))
        if not done() and not settings.quiet and time.monotonic() - said >= PROGRESS_EVERY_S - 0.01:
            said = time.monotonic()
            say(
                f"  [{time.monotonic() - clock:6.1f}s] {recorded():,} operations, "
                f"{len(history.failures):,} failed calls"
            )


def passed(data: dict) -> bool:
    """No violation (causal, of read atomicity, of linearizability), nothing lost or doubled,
    every replica the same, and every error a caller saw typed."""
    return (
        data.get("linearizability", {}).get("ok", True)
        and sum(data["violations"].values()) == 0
        and data["fractured_reads"] == 0
        and not data["lost_writes"]
        and data["lost_increments"] == 0
        and data["doubled_increments"] == 0
        and data["converged"]
        and not data.get("untyped_errors")
    )
