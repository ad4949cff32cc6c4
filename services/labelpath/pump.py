"""The label pump that Saturn's label sink and C3's sender share: it streams a region's labels in
timestamp order to whatever a subclass sends them through.

Gears append every label to a stream of their shard inside the write script (Saturn's ride in the
bulk entries, C3's have a stream of their own: ``gears.labels_stream``; where they are read:
sources.py). With one
shard the stream is already in timestamp order and the pump forwards it as it grows. With several
shards it merges them: every tick it asks each gear for a heartbeat (a time below which that gear
will make no new label), and forwards, in (ts, src) order, the labels at or below the smallest.
Every region hears from this one at least every 500 ms, so that proxies can tell a live tree from
a broken one and attaches elsewhere that present an update label never wait on a region that sends
them nothing: a heartbeat label goes to the regions that no label reached meanwhile (each costs a
wake-up at every hop, so they are as rare, and go as short a way, as those two uses allow; idle,
to every region).
Only labels some other region cares about leave the region (genuine partial replication).

Batching is Saturn's own: drain what is ready, never wait for company. Each read takes every
label written since the last one and sends them as one batch; at a low rate a batch holds one
label and adds no latency, under load batches grow by themselves (while one is read and sent, the
next gathers). The links downstream do the same with what is due on them (links.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from redis.exceptions import RedisError

from services import metrics, runtime
from services.labelpath.merge import MERGE_TICK_S, ShardMerge
from services.labelpath.sources import LabelSource, StreamLabels
from services.labelpath.stages import Stage
from services.proto import saturn_pb2
from services.region import gears
from services.region.store import region_shards
from services.topology import Topology

log = logging.getLogger("label-pump")

TRIM_EVERY_S = 1.0  # forwarded labels leave the stream, and the cursors are saved, this often
STORE_RETRY_S = 0.2  # after a store error (a Redis restarting), the next try


def parse_entry(raw: bytes) -> saturn_pb2.TreeLabel:
    """A label-stream entry: 'u|ts|src|group/row' (update), 't|ts|src|groups|group/row' (an
    atomic batch over several groups, space-separated: serializers route it to every region that
    replicates one of them) or 'm|ts|src|region' (migration); the kind in capitals when made
    outside the tree's order (common.lua's label_kind); under c3 also 'a|ts|src|past' (attach.lua)."""
    kind, ts, src, target = raw.decode().split("|", 3)
    label = saturn_pb2.TreeLabel(src=src, ts=int(ts), target=target, outside_order=kind.isupper())
    if kind == "a":  # c3: a client attached with a past up to target (attach.lua)
        label.type = saturn_pb2.TREE_ATTACH
    elif kind.lower() == "u":
        label.type, label.group = saturn_pb2.TREE_UPDATE, target.split("/", 1)[0]
    elif kind.lower() == "t":
        label.type = saturn_pb2.TREE_UPDATE
        label.group, label.target = target.split("|", 1)
    else:
        label.type = saturn_pb2.TREE_MIGRATION
    return label


def any_of(groups: str, wanted: set[str] | frozenset[str]) -> bool:
    """Whether a label's group (an atomic batch's: several, space-separated) is one of ``wanted``."""
    return groups in wanted or (" " in groups and not wanted.isdisjoint(groups.split()))


class LabelPump:
    """Reads a region's label streams in timestamp order, with heartbeats, and cursors saved and
    streams trimmed every second (the module's doc); where labels go is a subclass's: the Saturn
    sink's tree link, or C3's direct links (services/c3/sender.py)."""

    def __init__(self, topology: Topology, region: str, sources: Sequence[LabelSource] = ()):
        """``sources``: where each shard's labels are read (by default, by the pump itself)."""
        self.region = region
        self.topology = topology
        self.sent_through = 0  # the greatest ts sent on (labels and heartbeats)
        self.gears = region_shards(topology, region)
        self.stream = gears.labels_stream(topology.traits)  # where the gears append labels
        self.sources = list(sources)
        self.others = tuple(r for r in topology.region_names if r != region)
        self.last_reached = dict.fromkeys(self.others, 0.0)  # region → when a label for it last left
        self.messages_sent = metrics.LABEL_MESSAGES_SENT.labels(region)
        self.read_stage = Stage(region, "read")
        self.sent_stage = Stage(region, "sent")

    def label_sources(self) -> list[LabelSource]:
        """Where each shard's labels are read: as given, or by the pump itself."""
        return self.sources or [StreamLabels(gear, self.stream) for gear in self.gears]

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        """Sends labels read from the streams on, in (ts, src) order."""
        raise NotImplementedError

    def send_heartbeat(self, ts: int, regions: tuple[str, ...]) -> None:
        """Tells ``regions`` (all of ``others``: every region) that no label of this region up to
        ``ts`` is still to come."""
        raise NotImplementedError

    def reached(self, regions) -> None:
        """Labels (or a heartbeat) for ``regions`` just left: they hear from this region."""
        now = time.monotonic()
        last = self.last_reached
        for region in regions:
            last[region] = now

    def pumping(self, cursors: list[int], stop: asyncio.Event) -> list[Coroutine[Any, Any, None]]:
        """The work that reads the streams from ``cursors`` and trims them, until ``stop``."""
        pump = self.pump_one if len(self.gears) == 1 else self.pump_merged
        return [
            self.through_store_outages(pump, cursors, stop),
            self.through_store_outages(self.trim, cursors, stop),
            self.keep_alive(stop),
        ]

    def heartbeat_in(self) -> float:
        """Seconds until some region has not heard from this one for sink_heartbeat_s (labels
        for it count: under load, heartbeats go only where labels did not)."""
        quietest = min(self.last_reached.values(), default=time.monotonic())
        return quietest + self.topology.saturn.sink_heartbeat_s - time.monotonic()

    def heartbeat_due(self) -> bool:
        return self.heartbeat_in() <= 0

    def heartbeat_targets(self) -> tuple[str, ...]:
        """Who the due heartbeat goes to: every region unheard for half a period or more, so that
        the ones that would be due soon come along rather than costing a heartbeat of their own."""
        since = time.monotonic() - self.topology.saturn.sink_heartbeat_s / 2
        return tuple(r for r in self.others if self.last_reached[r] <= since)

    def beat(self, ts: int) -> None:
        self.send_heartbeat(ts, self.heartbeat_targets())

    async def cursors(self) -> list[int]:
        """Where each shard's stream was forwarded up to before a restart (0 = never)."""
        return list(await asyncio.gather(*(g.sink_cursor() for g in self.gears)))

    async def through_store_outages(self, work, cursors: list[int], stop: asyncio.Event) -> None:
        """Runs ``work`` again after a store error (its Redis restarting): the cursors in memory
        say what was forwarded, and the store lost nothing it acknowledged (AOF), so the sink
        goes on where it was, with its tree link kept (a new link would be a gap downstream).
        Meanwhile ``keep_alive`` tells the other regions that this one lives."""
        while not stop.is_set():
            try:
                await work(cursors, stop)
                return
            except (RedisError, OSError) as exc:
                log.warning("store unavailable (%s); retrying in %.1f s", exc, STORE_RETRY_S)
                await runtime.sleep_or_stop(stop, STORE_RETRY_S)

    async def keep_alive(self, stop: asyncio.Event) -> None:
        """While the pump cannot read a shard (its master down, failing over, or slow), the other
        regions still hear from this one: a heartbeat that promises only what was sent already.
        A shard whose master is lost then stalls this region's labels only; silent for
        ``tree_silence_s``, this region made every other fall back to timestamp order, which
        waits for every shard of every region, and every pair of regions stalled with it. The
        pump's own heartbeats come every period; this one only when they are half a period late."""
        period = self.topology.saturn.sink_heartbeat_s
        while not stop.is_set():
            await runtime.sleep_or_stop(stop, period / 2)
            if self.heartbeat_in() < -period / 2:
                self.beat(self.sent_through)

    async def pump_one(self, cursors: list[int], stop: asyncio.Event) -> None:
        """One shard: the stream is in ts order; forward it as it grows (a blocking read returns
        every label written since the last one), with a heartbeat every sink_heartbeat_s even
        when busy (regions that get none of these labels still need to hear that time has passed
        here)."""
        (source,) = self.label_sources()
        while not stop.is_set():
            entries, covered = await source.labels_after(cursors[0], max(0.001, self.heartbeat_in()))
            if entries:
                labels = [parse_entry(raw) for _, raw in entries]
                self.read_stage.labels(labels)
                self.send(labels)
            cursors[0] = max(cursors[0], covered)  # (entries without a label cover time too)
            if self.heartbeat_due():  # with the labels written since the read, which it covers
                stable, late = await source.heartbeat_after(cursors[0])
                if late:
                    self.send([parse_entry(raw) for _, raw in late])
                cursors[0] = max(cursors[0], stable)
                self.beat(stable)

    async def pump_merged(self, cursors: list[int], stop: asyncio.Event) -> None:
        """Several shards: forward, in (ts, src) order, what every shard has passed (merge.py:
        each shard tailed, a heartbeat asked only of the shards that hold labels back, once a
        tick at most, and of every shard once a heartbeat is due)."""
        merge = ShardMerge(self.gears, self.label_sources(), cursors, parse_entry, self.read_stage)
        tails = [merge.tail(k, stop) for k in range(len(self.gears))]
        await runtime.until_first_ends(self.merging(merge, stop), *tails)  # a store error ends all

    async def merging(self, merge: ShardMerge, stop: asyncio.Event) -> None:
        asked = 0.0  # when the shards behind were last asked
        while not stop.is_set():
            if not merge.holding():
                await merge.wait_news(stop, self.heartbeat_in())
            self.send(merge.take_stable())
            if merge.holding():  # the shards behind are asked at once, but once a tick at most
                if (wait_s := asked + MERGE_TICK_S - time.monotonic()) > 0:
                    await runtime.sleep_or_stop(stop, wait_s)
                    self.send(merge.take_stable())
                if merge.holding() and (behind := merge.behind()):
                    asked = time.monotonic()
                    await merge.ask(behind)
                    self.send(merge.take_stable())
            if self.heartbeat_due():
                await merge.ask(list(range(len(self.gears))))
                self.send(merge.take_stable())
                self.beat(merge.stable())

    async def before_save(self) -> None:
        """What must be durable before the cursors move past what was read (nothing, here)."""

    async def trim(self, cursors: list[int], stop: asyncio.Event) -> None:
        """Every second, off the hot path: the cursors are saved, then what they passed leaves the
        stream. A restart resends what was forwarded after the last save; proxies drop those
        labels as duplicates (at or below their origin's watermark)."""
        saved = list(cursors)
        while not stop.is_set():
            await runtime.sleep_or_stop(stop, TRIM_EVERY_S)
            await self.before_save()
            for k, (gear, cursor) in enumerate(zip(self.gears, list(cursors), strict=True)):
                if cursor != saved[k]:  # idle: nothing to save, nothing to trim
                    await gear.save_sink_cursor(cursor)
                    if self.stream == gears.LABEL_STREAM:  # (the bulk stream's trimmer keeps
                        await gear.trim_stream(self.stream, cursor)  # what the sink has not passed)
                    saved[k] = cursor
