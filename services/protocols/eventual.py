"""Eventual consistency: apply on arrival. The throughput upper bound and visibility lower bound."""

from __future__ import annotations

from services.protocols.base import AppliedCallback, Protocol
from services.region.remote_update import RemoteUpdate


class Eventual(Protocol):
    name = "eventual"

    async def accept_payloads(
        self, origin_gear: str, through_ts: int, updates: list[RemoteUpdate], on_applied: AppliedCallback
    ) -> None:
        applied = await self.store.apply_remote(origin_gear, through_ts, updates)
        if applied:
            on_applied(applied)
