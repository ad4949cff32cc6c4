"""What a protocol decides: the metadata gears emit, when a remote update becomes visible, and
when an attach may return. Everything else (store, gears, bulk transfer, client API) is shared,
so that protocols are compared on the same data path, as in the paper's §7.3."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from causal_client.label import Label
from services.region.store import RegionStore, RemoteUpdate

AppliedCallback = Callable[[list[RemoteUpdate]], None]


class Protocol(ABC):
    name: str = ""
    #: gears append every label to the region's label stream (for the label sink)
    emits_labels: bool = False

    def __init__(self, store: RegionStore):
        self.store = store

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

    @property
    def wants_heartbeats(self) -> bool:
        """Whether bulk senders must send heartbeats now (empty batches promising that nothing at
        or below their through_ts will follow): only for ordering by timestamp."""
        return False

    def durable_position(self, origin_gear: str, through_ts: int) -> int:
        """What to acknowledge once a batch up to ``through_ts`` has been accepted: the sender may
        forget everything up to it. Applying on arrival, that is the batch itself."""
        return through_ts


def protocol_for(name: str, store: RegionStore) -> Protocol:
    from services.protocols.eventual import Eventual
    from services.protocols.saturn import Saturn

    known: dict[str, type[Protocol]] = {"eventual": Eventual, "saturn": Saturn}
    if name not in known:
        raise NotImplementedError(
            f"protocol {name!r} is not implemented yet (available: {', '.join(sorted(known))})"
        )
    return known[name](store)
