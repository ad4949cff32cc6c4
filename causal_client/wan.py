"""WAN emulation: hold each cross-site message for the one-way latency of its link.

One small layer used by every component that sends across sites: bulk-data streams, their acks,
label streams and client calls to a remote region. FIFO order is kept even with jitter, because a
message is never released before the one sent ahead of it. No root or kernel features are needed,
and with zero latency it adds nothing. It lives in the client library because client calls to a
remote region need it too; the services import it from here.

Faults can be injected from outside (a nemesis): a JSON file named by ``$SATURN_WAN_CONTROL``,
which every process re-reads when it changes, holds partitions (messages between two sites are
held until the partition ends, then let through in order) and latency spikes (extra one-way
latency for a while), each between two sites in both directions, with wall-clock times:

    {"partitions": [{"sites": ["A", "B"], "from": 1795e6, "until": 1795e6}],
     "spikes": [{"sites": ["A", "C"], "extra_ms": 200, "from": 1795e6, "until": 1795e6}]}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


CONTROL_ENV = "SATURN_WAN_CONTROL"
CONTROL_REREAD_S = 0.05  # the control file's modification time is looked at this often at most


class WanControl:
    """The faults of the control file (module doc), re-read when the file changes."""

    def __init__(self, path: str):
        self.path = path
        self._checked = 0.0
        self._stamp: int | None = None
        self._partitions: list[tuple[frozenset[str], float, float]] = []
        self._spikes: list[tuple[frozenset[str], float, float, float]] = []

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < CONTROL_REREAD_S:
            return
        self._checked = now
        try:
            stamp = os.stat(self.path).st_mtime_ns
            if stamp == self._stamp:
                return
            with open(self.path, encoding="utf-8") as file:
                data = json.loads(file.read() or "{}")
        except (OSError, ValueError):
            return  # no file (no faults yet), or one being replaced: keep what was known
        self._stamp = stamp
        self._partitions = [
            (frozenset(p["sites"]), p["from"], p["until"]) for p in data.get("partitions", [])
        ]
        self._spikes = [
            (frozenset(p["sites"]), p["from"], p["until"], p["extra_ms"] / 1000.0)
            for p in data.get("spikes", [])
        ]

    def effect(self, sites: frozenset[str]) -> tuple[float, float]:
        """For a message between ``sites`` sent now: (extra latency in s, seconds to hold it)."""
        self._refresh()
        now = time.time()
        extra = sum(s for pair, start, end, s in self._spikes if pair == sites and start <= now < end)
        holds = [end - now for pair, start, end in self._partitions if pair == sites and start <= now < end]
        return extra, max(holds, default=0.0)


_controls: dict[str, WanControl] = {}


def control() -> WanControl | None:
    """This process's fault control, if ``$SATURN_WAN_CONTROL`` names one."""
    path = os.environ.get(CONTROL_ENV)
    if not path:
        return None
    if path not in _controls:
        _controls[path] = WanControl(path)
    return _controls[path]


class Link:
    """The emulated properties of one directed site-to-site link (``sites``: its two ends, where
    injected faults apply; None for no fault injection)."""

    __slots__ = ("_control", "_last_release", "jitter_s", "latency_s", "sites")

    def __init__(self, latency_ms: float, jitter_ms: float = 0.0, sites: tuple[str, str] | None = None):
        self.latency_s = latency_ms / 1000.0
        self.jitter_s = jitter_ms / 1000.0
        self._last_release = 0.0
        self.sites = frozenset(sites) if sites and sites[0] != sites[1] else None
        self._control = control() if self.sites else None

    @property
    def is_instant(self) -> bool:
        return self.latency_s == 0 and self.jitter_s == 0 and self._control is None

    def _delay(self) -> float:
        """This message's one-way delay: latency, jitter and any injected spike or partition."""
        delay = self.latency_s + (random.uniform(0, self.jitter_s) if self.jitter_s else 0.0)
        if self._control is not None and self.sites is not None:  # (the one is set with the other)
            extra, hold = self._control.effect(self.sites)
            delay = max(delay + extra, hold)
        return delay

    def release_time(self, sent_at: float) -> float:
        """When a message sent at ``sent_at`` (monotonic seconds) arrives; never before the last."""
        self._last_release = max(self._last_release, sent_at + self._delay())
        return self._last_release

    def sleep_one_way(self) -> None:
        """Blocking delay for one leg of a synchronous call (gevent-friendly when patched).

        Calls are independent of each other, so no FIFO coupling here: concurrent calls from
        several threads each pay one latency, not the sum."""
        if not self.is_instant:
            delay = self._delay()
            if delay > 0:
                time.sleep(delay)


#: A link with no latency: for a sender whose receiver serves the latency on arrival (bulk
#: payloads, C3's labels), so that what was sent outlives its sender, as bytes on a wire do.
AT_ONCE = Link(0.0)


class DelayLine(Generic[T]):
    """An asyncio FIFO whose items come out one link-latency after they went in.

    An item put with ``slack`` may wait that much longer, until something behind it is due: it
    then leaves with that, in one message. For messages that only need to arrive eventually
    (heartbeats), so that several share one send and one wake-up at the receiver."""

    def __init__(self, link: Link):
        self.link = link
        self._items: deque[tuple[float, float, T]] = deque()  # (release, deadline, item)
        self._wakeup = asyncio.Event()

    def put(self, item: T, slack: float = 0.0) -> None:
        release = self.link.release_time(time.monotonic())
        self._items.append((release, release + slack, item))
        self._wakeup.set()

    def put_back(self, items: list[T]) -> None:
        """Items taken that could not be sent: first out again, at once."""
        for item in reversed(items):
            self._items.appendleft((0.0, 0.0, item))
        self._wakeup.set()

    def __len__(self) -> int:
        return len(self._items)

    def _head_due(self) -> float:
        """When the head must leave: its deadline, or earlier if an item behind it is due."""
        release, deadline, _ = self._items[0]
        if deadline == release:
            return release
        return min(d for _, d, _ in self._items)

    def next_due(self) -> float | None:
        """When the next item must leave (monotonic seconds), None when empty."""
        return self._head_due() if self._items else None

    def take_due(self, now: float) -> list[T]:
        """Without waiting: the head if it is due by ``now``, with every item whose latency has
        passed behind it, in order (none if the head is not due)."""
        if not self._items or self._head_due() > now:
            return []
        return [self._items.popleft()[2], *self._released(now)]

    def _released(self, now: float) -> list[T]:
        """The items at the head whose latency has passed by ``now`` (slack or not)."""
        out = []
        while self._items and self._items[0][0] <= now:
            out.append(self._items.popleft()[2])
        return out

    def items(self) -> list[T]:
        """What the line holds, in order (nothing is taken)."""
        return [item for _, _, item in self._items]

    async def get(self) -> T:
        while True:
            if self._items:
                delay = self._head_due() - time.monotonic()
                if delay <= 0:
                    return self._items.popleft()[2]
                if self._items[0][0] == self._items[0][1]:
                    await asyncio.sleep(delay)  # later items are never due before the head
                else:  # a slack head: an item put meanwhile may be due sooner
                    self._wakeup.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):  # wait_for may swallow a cancellation (3.11)
                            await self._wakeup.wait()
            else:
                self._wakeup.clear()
                await self._wakeup.wait()

    async def get_due(self) -> list[T]:
        """The head once it is due, with every item whose latency has passed behind it (in
        order): when the consumer falls behind, or slack items gathered, they leave as one."""
        return [await self.get(), *self._released(time.monotonic())]


#: What a connection carries, for links with a bandwidth (services/relay/relay.py): its class each
#: way. ``meta``: labels, heartbeats, migrations, claims, attaches (critical both ways); ``ship``:
#: bulk payloads, with their acknowledgements back (critical); ``data``: a client's reads and
#: writes (bulk both ways).
TRAFFIC_CLASSES = ("meta", "ship", "data")


class Relays:
    """Where a connection from a site to an endpoint goes: through the relay of the site pair's
    link when the link has a bandwidth (every connection between the two sites shares it),
    straight to the endpoint otherwise. Built from the topology's routes, ``(from_site, endpoint,
    traffic class, relay endpoint)``, which a client learns with the rest (``describe``)."""

    def __init__(self, routes: list[tuple[str, str, str, str]] | None = None):
        self._via = {(site, endpoint, cls): via for site, endpoint, cls, via in routes or ()}

    def __bool__(self) -> bool:
        return bool(self._via)

    def route(self, from_site: str | None, endpoint: str, cls: str) -> str:
        if cls not in TRAFFIC_CLASSES:
            raise ValueError(f"traffic class {cls!r}: one of {', '.join(TRAFFIC_CLASSES)}")
        return self._via.get((from_site or "", endpoint, cls), endpoint)
