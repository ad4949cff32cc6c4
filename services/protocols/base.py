"""What a protocol decides: the metadata gears emit, when a remote update becomes visible, and
when an attach may return. Everything else (store, gears, bulk transfer, client API) is shared,
so that protocols are compared on the same data path, as in the paper's §7.3."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from causal_client.label import Label
from services.region.remote_update import RemoteUpdate
from services.region.stable_order import StableOrder
from services.region.store import RegionStore
from services.topology import Topology
from services.transport.server import Health, LinkServer

AppliedCallback = Callable[[list[RemoteUpdate]], None]


@dataclass
class ReceivingSide:
    """What the bulk receiver's process offers a protocol at start: its link server (for services
    of the protocol's own, e.g. the tree's ``tree`` service) and what it reports as healthy, where
    remote updates made visible are reported, how senders are told that the need for heartbeats
    changed, and the stop event."""

    server: LinkServer
    health: Health
    on_applied: Callable[[str, list[RemoteUpdate]], None]
    heartbeats_changed: Callable[[], None]
    stop: asyncio.Event


Task = Coroutine[Any, Any, None]


class Protocol(ABC):
    name: str = ""  # its row in services/traits.py says what it is; this class, how it receives

    def __init__(self, store: RegionStore):
        self.store = store

    async def start_receiving(self, side: ReceivingSide) -> list[Task]:
        """Sets up what the protocol needs in the process that receives payloads (servers,
        background work, health); returns the coroutines to run until ``side.stop``. A failure
        of one ends the process (crash-only: the supervisor starts it again)."""
        return []

    async def wait_attach(self, label: Label, timeout: float | None = None) -> None:
        """Returns once the client's causal past (``label``) is visible in this region; raises
        TimeoutError after ``timeout`` seconds. The gears decide, by protocol (attach.lua), so
        that a client calling them directly waits exactly as the gateway does."""
        await self.store.wait_visible(label, timeout)

    @abstractmethod
    async def accept_payloads(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate], on_applied: AppliedCallback
    ) -> None:
        """Takes a batch from bulk transfer. Calls ``on_applied`` with updates made visible."""

    async def resume_position(self, origin_gear: str) -> int:
        """Where bulk transfer from ``origin_gear`` resumes: every update at or below it is applied
        here for good."""
        return await self.store.position(origin_gear)

    @classmethod
    def bulk_heartbeat_s(cls, topology: Topology) -> float:
        """How often an idle bulk sender heartbeats while its receiver wants heartbeats."""
        return topology.saturn.bulk_heartbeat_s

    @property
    def wants_heartbeats(self) -> bool:
        """Whether bulk senders must send heartbeats now (empty batches promising that nothing at
        or below their through_ts will follow): only for ordering by timestamp."""
        return False

    def durable_position(self, origin_gear: str, through_ts: int) -> int:
        """What to acknowledge once a batch up to ``through_ts`` has been accepted: the sender may
        forget everything up to it. Applying on arrival, that is the batch itself."""
        return through_ts

    def bulk_link(self, origin_gear: str, opened: bool) -> None:
        """A sender's link from ``origin_gear`` opened or closed (a region gone shows here)."""
        return None


class HoldsPayloads(Protocol):
    """A protocol whose receiver holds payloads until they may become visible (``order``, set up
    by :meth:`start_receiving`): bulk transfer's positions are its watermarks, so a sender
    resumes after what was applied, never after what was only received."""

    order: StableOrder | None = None

    def _order(self) -> StableOrder:
        assert self.order is not None, "bulk transfer reaches only the process that receives"
        return self.order

    async def accept_payloads(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate], on_applied: AppliedCallback
    ) -> None:
        """Held until they may become visible (``order.on_payloads``): Saturn's proxy applies them
        when their labels come, the baselines' stabilizer when the stable time passes them."""
        self._order().on_payloads(origin_gear, through_ts, updates)

    async def resume_position(self, origin_gear: str) -> int:
        return self._order().durable_position(origin_gear.split("/", 1)[0])

    def durable_position(self, origin_gear: str, through_ts: int) -> int:
        return self._order().durable_position(origin_gear.split("/", 1)[0])

    def bulk_link(self, origin_gear: str, opened: bool) -> None:
        if self.order is not None:
            self.order.bulk_link(origin_gear, opened)
