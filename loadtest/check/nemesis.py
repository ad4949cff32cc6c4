"""Faults scheduled during a checked run, one at a time, each healed before the next.

- crashes (SIGKILL from outside; the launcher's supervisor starts the process again): a
  serializer, a label sink (its own process, or the bulk sender that runs it), a bulk receiver
  (with its remote proxy), a bulk sender, a frontend, a store node (Redis, durable: it comes back
  with what it acknowledged; on a Redis Cluster store any node, master or replica, so that a
  master may restart from its AOF before its replica is promoted, or after);
- a crash twice: any of those processes killed, and killed again soon (0.5-3 s) after it came
  back, while it resumes (a sender's first batches, a sink's first labels, a master's resync);
- a whole region: every process of it stopped at once, started again after the fault's time;
- a master of a region's Redis Cluster store (``[store] engine = "cluster"``, three masters or
  more, with replicas) killed and kept down until a replica has taken its place, then started
  again (it rejoins as the new master's replica);
- a shard of a region's cluster store moved to another master while the region serves;
- a partition of a WAN link between two sites: messages held, then let through in order;
- a latency spike on a WAN link;
- congestion: one direction of a link with a bandwidth flooded with bulk bytes (its relay's
  flood port, services/wan/flood.py), so everything behind them waits (or, with ``priority``,
  only the bulk data behind them);
- a full store: a master of a region at its memory limit (``maxmemory`` below what it holds):
  it refuses writes, clients get ``StoreFull``, nothing acknowledged may be lost, and writes go
  on by themselves once the limit is lifted;
- a slow shard: a master of a region of two shards or more stopped and let go in bursts;
- a region outage: every process of a region stopped for a minute (``OUTAGE_S``), then started;
- a clock: a region's clock off by up to ±500 ms for half the fault, then jumping back, then
  right again. The offset is the stores' (every ts, heartbeat and strong stamp is made by a gear,
  from its store's clock: ``set_clock``); libfaketime, the usual tool, makes Debian's Redis
  recurse at start and Python's ``select`` fail.

WAN faults go through the cluster's WAN control file, which every process reads
(``causal_client.wan``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import redis

from causal_client import CausalClient, CausalError, Session, tls, wire
from services import auth
from services.launcher import store_cluster
from services.launcher.cluster import Cluster
from services.plan import label_sink_process
from services.region import gears
from services.region.sync_shard import SyncShard
from services.topology import Topology
from services.wan.flood import flood
from services.wan.routes import FLOOD, flood_endpoint

CRASHES = {  # fault → the processes it may hit (by the end of their names; "sink": plan's choice)
    "serializer": "serializer.",
    "sink": ".label-sink",
    "receiver": ".bulk-receiver",
    "sender": ".bulk-sender",
    "frontend": ".frontend0",
    "store": ".redis",  # any store node (.redis0, .redis1, ...)
}
TWICE = "twice"  # any process a crash may hit, killed again soon after it came back
AGAIN_AFTER_S = (0.5, 3.0)  # how soon after it came back the second kill comes (uniform)
WAN_FAULTS = ("region", "master", "move", "partition", "spike", "congestion")  # run by methods of their own
STORE_FAULTS = ("store-full", "slow-shard", "region-outage", "clock")  # methods of their own too
FAULTS = (*CRASHES, TWICE, *WAN_FAULTS, *STORE_FAULTS)
CLUSTER_STORE_FAULTS = ("master", "move")  # only where regions' stores are Redis Clusters
SPIKE_MS = 250.0
OUTAGE_S = 60.0  # a region gone for a minute (region-outage), whatever the fault's time
PAUSED_S, RUNNING_S = 0.3, 0.2  # a slow shard's master: stopped this long, then running this long
BACK_WITHIN_S = 30.0
CLOCK_SKEW_MS = 500.0  # a region's clock off by up to this much either way (clock)
CLOCK_JUMP_MS = (300.0, 800.0)  # ... then jumping back by this much
CATCH_UP_LIMIT_S = 300.0  # a region that has not caught up by then is reported as not having
PROBE_EVERY_S = 0.1
PROBE_ROW = "nemesis-catch-up"


@dataclass
class Event:
    fault: str
    target: str
    start: float  # seconds since the run began
    end: float | None = None
    note: str = ""
    back: float | None = None  # region-outage: when its processes were started again
    caught_up_s: float | None = None  # ... and how long after that it showed a write made since


class Nemesis(threading.Thread):
    def __init__(
        self,
        cluster: Cluster | None,
        faults: list[str],
        clock: float,
        stop: threading.Event,
        interval_s: float,
        fault_s: float,
        seed: int,
        say: Callable[[str], None],
        outage_s: float = OUTAGE_S,
    ):
        super().__init__(name="nemesis", daemon=True)
        self.outage_s = outage_s
        self.cluster, self.clock, self.stop, self.say = cluster, clock, stop, say
        self.interval_s, self.fault_s = interval_s, fault_s
        self.rng = random.Random(seed)
        self.faults = [f for f in faults if cluster is not None and self.targets(f)]
        self.events: list[Event] = []
        self.errors: list[str] = []
        self.went_round = threading.Event()  # every fault done once (at once if there are none)
        if not self.faults:
            self.went_round.set()

    def now(self) -> float:
        return time.monotonic() - self.clock

    @property
    def live(self) -> Cluster:
        """The cluster the faults are done to (a run without one has no faults: ``__init__``)."""
        assert self.cluster is not None, "faults need a cluster of the run's own"
        return self.cluster

    # -- what can be hit ----------------------------------------------------------------------
    def targets(self, fault: str) -> list[str]:
        t = self.live.topology
        if fault == "sink":  # the processes that run sinks: their own, or the bulk senders
            return sorted(filter(None, (label_sink_process(t, r) for r in t.region_names)))
        if fault == TWICE:
            return sorted({n for f in CRASHES for n in self.targets(f)})
        if fault in CRASHES:
            suffix = CRASHES[fault]
            return sorted(n for n in self.live.specs if _named_by(n, suffix))
        if fault == "region":
            return list(t.region_names)
        if fault == "master":  # a failover needs a majority of masters left, and a replica
            failover = t.store.engine == "cluster" and t.store.masters >= 3 and t.store.replicas > 0
            return list(t.region_names) if failover else []
        if fault == "move":  # a shard moved between two masters
            return list(t.region_names) if t.store.engine == "cluster" and t.store.masters >= 2 else []
        if fault in ("store-full", "region-outage", "clock"):  # a store node of a region; a whole region
            return list(t.region_names)
        if fault == "slow-shard":  # a master beside others: regions of two shards or more
            return [r for r in t.region_names if t.region(r).shards >= 2]
        if fault == "congestion":  # the directions of the links that have a bandwidth
            return sorted(f"{r.from_site}>{r.to_site}" for r in t.relay_routes if r.cls == FLOOD)
        sites = sorted({r.site for r in t.regions})
        return [f"{a}|{b}" for i, a in enumerate(sites) for b in sites[i + 1 :]]

    # -- the schedule --------------------------------------------------------------------------
    def run(self) -> None:
        turn = 0
        while not self.stop.wait(self.interval_s - self.fault_s if turn else self.interval_s / 2):
            if not self.faults:
                return
            fault = self.faults[turn % len(self.faults)]
            turn += 1
            target = self.rng.choice(self.targets(fault))
            event = Event(fault, target, self.now())
            self.events.append(event)
            self.say(f"  [{event.start:6.1f}s] nemesis: {fault} {target}")
            try:
                method = fault.replace("-", "_") if fault in (*WAN_FAULTS, *STORE_FAULTS, TWICE) else "crash"
                getattr(self, f"_{method}")(target)
            except Exception as exc:  # a fault that could not be done is reported, not fatal
                self.errors.append(f"{fault} {target}: {exc}")
                event.note = f"failed: {exc}"
            event.end = self.now()
            if turn == len(self.faults):
                self.went_round.set()

    def _crash(self, name: str) -> None:
        """SIGKILL from outside, as a crash would; the supervisor brings it back."""
        dead = self.live.processes[name].popen.pid
        os.kill(dead, signal.SIGKILL)
        self.stop.wait(self.fault_s)
        deadline = time.monotonic() + BACK_WITHIN_S
        while time.monotonic() < deadline:
            running = self.live.processes[name]
            if (
                running.popen.pid != dead
                and running.popen.poll() is None
                and self.live.is_healthy(running.spec)
            ):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{name} not back within {BACK_WITHIN_S:.0f} s")

    def _twice(self, name: str) -> None:
        """Killed, back, and killed again while it resumes."""
        self._crash(name)
        again = self.rng.uniform(*AGAIN_AFTER_S)
        self.events[-1].note = f"again {again:.1f} s after it came back"
        if not self.stop.wait(again):
            self._crash(name)

    def _region(self, region: str, down_s: float | None = None) -> None:
        names = [n for n, spec in self.live.specs.items() if spec.region == region and not _web(n)]
        for name in reversed(names):
            self.live.kill(name)
        self.stop.wait(self.fault_s if down_s is None else down_s)
        for name in names:  # in start order: stores first
            self.live.restart(name)

    def _master(self, region: str) -> None:
        """One of the region's current masters SIGKILLed and held down until the cluster has
        promoted a replica in its place (at least the fault's time), then started again."""
        t = self.live.topology
        masters = _masters(t, region)
        killed = self.rng.choice(masters)
        victim = f"{region}.redis{killed}"
        self.events[-1].target = victim
        self.live.kill(victim)
        started = time.monotonic()
        self.stop.wait(self.fault_s)
        deadline = started + BACK_WITHIN_S
        while len([k for k in _masters(t, region) if k != killed]) < len(masters):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no replica of {victim} promoted within {BACK_WITHIN_S:.0f} s")
            time.sleep(0.05)
        self.events[-1].note = f"replica promoted after {time.monotonic() - started:.1f} s"
        self.live.restart(victim)

    def _move(self, region: str) -> None:
        """A random shard of the region moved to another of its current masters."""
        t = self.live.topology
        shard = self.rng.randrange(t.region(region).shards)
        here = store_cluster.master_of(t, region, shard, auth.secret())
        to = self.rng.choice([k for k in _masters(t, region) if k != here])
        held = store_cluster.move_shard(t, region, shard, to, auth.secret())
        self.events[-1].target = f"{region} shard {shard}"
        self.events[-1].note = f"redis{here} to redis{to}, calls held {held:.2f} s"

    def _store_full(self, region: str) -> None:
        """One of the region's masters at its memory limit for the fault's time (``maxmemory``
        below what it holds, no eviction): it refuses every write, and its region's clients are
        told so (``StoreFull``); then the limit is lifted and writes go on by themselves."""
        t = self.live.topology
        node = self._a_master(region)
        with full_store(t, region, node) as used:
            self.events[-1].note = f"{used / 2**20:.1f} MB held, limit {used // 2 / 2**20:.1f} MB"
            self.stop.wait(self.fault_s)

    def _a_master(self, region: str) -> int:
        """One of the region's store nodes that is a master now (the event names it)."""
        node = self.rng.choice(_masters(self.live.topology, region) or [0])
        self.events[-1].target = f"{region}.redis{node}"
        return node

    def _slow_shard(self, region: str) -> None:
        """One of the region's masters stopped (SIGSTOP) and let go (SIGCONT) in bursts for the
        fault's time: a slow partition, as Occult tells it, which must not hold back the other
        shards' remote updates or the other regions."""
        pid = self.live.processes[f"{region}.redis{self._a_master(region)}"].popen.pid
        ends, bursts = time.monotonic() + self.fault_s, 0
        try:
            while time.monotonic() < ends and not self.stop.is_set():
                os.kill(pid, signal.SIGSTOP)
                bursts += 1
                self.stop.wait(PAUSED_S)
                os.kill(pid, signal.SIGCONT)
                self.stop.wait(RUNNING_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        self.events[-1].note = f"{bursts} pauses of {PAUSED_S * 1000:.0f} ms"

    def _clock(self, region: str) -> None:
        """The region's clock off by up to ±CLOCK_SKEW_MS, then jumping back by CLOCK_JUMP_MS
        more or less, then right again (as a time server's mistakes and their correction)."""
        skew = self.rng.uniform(-CLOCK_SKEW_MS, CLOCK_SKEW_MS)
        back = skew - self.rng.uniform(*CLOCK_JUMP_MS)
        topology = self.live.topology
        self.events[-1].note = f"{skew:+.0f} ms, then back to {back:+.0f} ms"
        try:
            set_clock(topology, region, skew)
            self.stop.wait(self.fault_s / 2)
            set_clock(topology, region, back)
            self.stop.wait(self.fault_s / 2)
        finally:
            set_clock(topology, region, 0.0)

    def _region_outage(self, region: str) -> None:
        """Every process of the region stopped for ``outage_s`` (a minute: AntidoteDB's
        datacenter that never caught up after it was stopped), then started again. How long it
        then takes to catch up is measured with a write made elsewhere after it came back."""
        event = self.events[-1]
        self._region(region, self.outage_s)
        event.back = self.now()
        event.caught_up_s = catch_up(self.live.topology, region, self.stop)
        if event.caught_up_s is not None:
            event.note = f"caught up {event.caught_up_s:.1f} s after it came back"

    def _congestion(self, direction: str) -> None:
        """The link's bandwidth taken by a flood for the fault's time; returns once what it
        queued has crossed."""
        from_site, to_site = direction.split(">")
        result = flood(flood_endpoint(self.live.topology, from_site, to_site), self.fault_s, self.stop)
        self.events[-1].note = f"{result.delivered / 1e6:.1f} MB at {result.mbit_s or 0:.1f} Mbit/s"

    def _partition(self, pair: str) -> None:
        self._wan("partitions", pair, {})

    def _spike(self, pair: str) -> None:
        self._wan("spikes", pair, {"extra_ms": SPIKE_MS})

    def _wan(self, kind: str, pair: str, fields: dict) -> None:
        now = time.time()
        entry = {"sites": pair.split("|"), "from": now, "until": now + self.fault_s, **fields}
        write_wan_control(self.live, {kind: [entry]})
        self.stop.wait(self.fault_s)
        write_wan_control(self.live, {})

    def heal(self) -> None:
        """After the run: no WAN fault left, every process stopped on purpose started again."""
        if self.cluster is None:
            return
        write_wan_control(self.live, {})
        for name in list(self.live.held):
            self.live.restart(name)


def set_clock(topology: Topology, region: str, offset_ms: float) -> None:
    """Every shard of ``region`` reads its clock ``offset_ms`` off from now on (0: right)."""
    offset_us = round(offset_ms * 1000)
    for shard in range(topology.region(region).shards):
        key = gears.shard_key(gears.CLOCK_KEY, wire.shard_tag(shard))

        def set_offset(store: redis.Redis, key: str = key) -> object:
            return store.set(key, offset_us) if offset_us else store.delete(key)

        with SyncShard(topology, region, shard, timeout=5.0) as shard_store:
            shard_store.run(set_offset)


def catch_up(
    topology: Topology, region: str, stop: threading.Event, limit_s: float = CATCH_UP_LIMIT_S
) -> float | None:
    """Seconds until ``region`` shows a write made after this call at another region that shares
    a group with it: everything that region missed while it was gone comes first (the tree's
    order, or timestamp order up to the write's ts). None: not within ``limit_s``."""
    began = time.monotonic()
    shared = [(g, m) for g, m in sorted(topology.group_members.items()) if region in m and len(m) > 1]
    if not shared:
        return None
    group, members = shared[0]
    writer = next(m for m in members if m != region)
    value = secrets.token_hex(4)
    with CausalClient.connect(
        topology.store_endpoints(writer), endpoints=topology.client_endpoints()
    ) as client:
        while not stop.is_set() and time.monotonic() - began < limit_s:
            try:
                client.session(writer, auto_migrate=False).write(group, PROBE_ROW, {"v": value})
                break
            except CausalError:
                time.sleep(PROBE_EVERY_S)
        reader: Session | None = None
        while not stop.is_set() and time.monotonic() - began < limit_s:
            try:
                reader = reader or client.session(region, auto_migrate=False)
                if reader.read(group, PROBE_ROW).get("v") == value.encode():
                    return time.monotonic() - began
            except CausalError:
                reader = None  # the region's frontend may still be starting
            time.sleep(PROBE_EVERY_S)
    return None


def _masters(topology: Topology, region: str) -> list[int]:
    """The region's store nodes that are masters now (by their own word)."""
    host = topology.node_host(region)
    nodes = range(topology.store_nodes(region))
    return [k for k in nodes if _role(host, topology.redis_port(region, k)) == "master"]


@contextlib.contextmanager
def full_store(topology: Topology, region: str, node: int = 0) -> Iterator[int]:
    """Store node ``node`` of ``region`` at its memory limit while in the block (``maxmemory``
    half of what it holds, no eviction): it refuses every write. Yields the bytes it holds; the
    limit is lifted on the way out."""
    with _store_node(topology.node_host(region), topology.redis_port(region, node)) as store:
        before = store.config_get("maxmemory", "maxmemory-policy")
        used = int(store.info("memory")["used_memory"])
        store.config_set("maxmemory-policy", "noeviction")
        store.config_set("maxmemory", max(1, used // 2))
        try:
            yield used
        finally:
            store.config_set("maxmemory", before["maxmemory"])
            store.config_set("maxmemory-policy", before["maxmemory-policy"])


def _store_node(host: str, port: int) -> redis.Redis:
    """A connection to one store node, as the deployment's own (its secret, its TLS)."""
    secure = tls.redis_options()
    return redis.Redis(host=host, port=port, password=auth.secret(), socket_timeout=2, **secure)  # type: ignore[arg-type]


def _role(host: str, port: int) -> str | None:
    """A store node's replication role ("master", "slave"; None: unreachable)."""
    try:
        with _store_node(host, port) as node:
            return node.info("replication").get("role")
    except redis.RedisError:
        return None


def _named_by(name: str, suffix: str) -> bool:
    """Whether a process is one a crash fault names: by the end of its name ("serializer." by
    its start), a store node by its kind, whatever its number."""
    if suffix == ".redis":
        kind, _, number = name.rpartition(".")[2].partition("redis")
        return not kind and number.isdigit()
    return name.endswith(suffix) or name.startswith(suffix)


def _web(name: str) -> bool:
    return name.endswith((".web", ".celery", ".broker"))


def write_wan_control(cluster: Cluster, faults: dict) -> None:
    path = cluster.wan_control_file
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
