"""How fast each shard of a region shows remote writes, during a checked run with ``slow-shard``.

Occult's point is that one slow partition must not hold back the others ("no slowdown
cascades"). The regions' visibility metric cannot say so: it is taken when the receiver's call
returns, which for a run applied across shards is when the slowest shard answered, although the
others' rows were readable before. So this probe measures what a reader sees: for every region
with two shards or more, a thread writes a fresh row at another region that replicates it, on
each shard in turn, and reads it at the region until it is there. ``shard_effects`` then sets the
slowed shard's rows, and the other shards' rows of the same region, while a slow-shard fault was
on, against the time no fault was on.

The rows are the probe's own (``probe-…``), outside the checked history and its convergence.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

import redis

from causal_client import CausalClient, CausalError
from causal_client.wire import shard_of
from loadtest.harness.stats import mean_present
from services.topology import Topology

PAUSE_S = 0.3  # between one probe's row and the next
POLL_S = 0.02  # how often the region is read until the row is there (a pause is 300 ms)
GIVE_UP_S = 10.0  # a row not there by then counts as not seen (None)


@dataclass(frozen=True)
class ProbeSample:
    t: float  # when the row was written, seconds since the run began
    region: str  # where it was read
    shard: int  # the region's shard that holds it
    ms: float | None  # written → seen there; None: not seen within GIVE_UP_S


def probed_regions(topology: Topology) -> list[tuple[str, str, str]]:
    """(region, a writer region, a group both replicate) for every region of two shards or more
    on standalone stores (a Redis Cluster's shards are its masters' slot ranges, not probed)."""
    if topology.store.engine == "cluster":
        return []
    found = []
    for region in topology.region_names:
        if topology.region(region).shards < 2:
            continue
        for group, members in sorted(topology.group_members.items()):
            others = [m for m in members if m != region]
            if region in members and others:
                found.append((region, others[0], group))
                break
    return found


class ShardProbe(threading.Thread):
    """One region's shards, probed in turn until ``stop`` (module doc)."""

    def __init__(
        self, client: CausalClient, topology: Topology, region: str, writer: str, group: str,
        clock: float, stop: threading.Event, samples: list[ProbeSample],
    ):  # fmt: skip
        super().__init__(name=f"shard-probe-{region}", daemon=True)
        self.client, self.region, self.writer, self.group = client, region, writer, group
        self.shards = topology.region(region).shards
        self.clock, self.stop, self.samples = clock, stop, samples
        self.run_id = f"probe-{region}-{int(clock * 1000) % 1_000_000}"

    def row_on(self, shard: int, counter: itertools.count) -> str:
        """A fresh row of the group that the region keeps on ``shard``."""
        while True:
            row = f"{self.run_id}-{next(counter)}"
            if shard_of(self.group, row, self.shards) == shard:
                return row

    def run(self) -> None:
        at_writer = self.client.session(self.writer, auto_migrate=False)
        reader = self.client.session(self.region, auto_migrate=False)
        counter = itertools.count()
        for shard in itertools.cycle(range(self.shards)):
            if self.stop.wait(PAUSE_S):
                return
            row = self.row_on(shard, counter)
            written = time.monotonic()
            try:
                at_writer.write(self.group, row, {"v": "1"})
            except (CausalError, redis.RedisError, OSError):
                continue  # the writer's region is down or refusing: no sample
            seen = self._wait_seen(reader, row, written + GIVE_UP_S)
            if self.stop.is_set():
                return  # the run ended while it waited: neither seen nor given up on
            ms = None if seen is None else 1000 * (seen - written)
            self.samples.append(ProbeSample(written - self.clock, self.region, shard, ms))

    def _wait_seen(self, reader, row: str, deadline: float) -> float | None:
        while time.monotonic() < deadline and not self.stop.is_set():
            try:
                if reader.read(self.group, row, ["v"]):
                    return time.monotonic()
            except (CausalError, redis.RedisError, OSError):
                pass  # the region is down or busy: read again
            time.sleep(POLL_S)
        return None


def start_probes(
    client: CausalClient, topology: Topology, clock: float, stop: threading.Event
) -> tuple[list[ShardProbe], list[ProbeSample]]:
    samples: list[ProbeSample] = []
    probes = [
        ShardProbe(client, topology, region, writer, group, clock, stop, samples)
        for region, writer, group in probed_regions(topology)
    ]
    for probe in probes:
        probe.start()
    return probes, samples


def shard_effects(faults: list[dict], samples: list[dict]) -> dict | None:
    """Mean written-to-seen time at a slowed region, during its slow-shard faults, of rows on the
    slowed shard and on its other shards, against every probed row while no fault was on (None
    without probes or slow-shard faults)."""
    slowed = [
        (f["target"].rpartition(".redis")[0], int(f["target"].rpartition(".redis")[2]), f["start"], f["end"])
        for f in faults
        if f["fault"] == "slow-shard" and ".redis" in f["target"] and f["end"] is not None
    ]
    if not samples or not slowed:
        return None
    spans = [(f["start"], f["end"] if f["end"] is not None else f["start"]) for f in faults]

    def during_slow(sample: dict) -> str | None:
        for region, shard, start, end in slowed:
            if start <= sample["t"] < end and sample["region"] == region:
                return "slowed" if sample["shard"] == shard else "others"
        return None

    groups: dict[str, list[float | None]] = {"slowed": [], "others": [], "quiet": []}
    for sample in samples:
        where = during_slow(sample)
        if where is not None:
            groups[where].append(sample["ms"])
        elif not any(a <= sample["t"] < b for a, b in spans):
            groups["quiet"].append(sample["ms"])

    return {
        "slowed_shard_ms": mean_present(groups["slowed"]),
        "other_shards_ms": mean_present(groups["others"]),
        "without_faults_ms": mean_present(groups["quiet"]),
        "samples": {k: len(v) for k, v in groups.items()},
        "not_seen": {k: sum(v is None for v in values) for k, values in groups.items()},
    }
