"""Consistency protocols as plug-ins over one data path (docs/ARCHITECTURE.md, "Protocols").

The registry: a topology's ``protocol`` names one of :data:`PROTOCOLS`. A protocol sets up what
it needs through :meth:`Protocol.start_receiving`; bulk transfer and the frontends know none by
name.
"""

from services.probes import READY_HEALTH
from services.protocols.base import Protocol, ReceivingSide
from services.protocols.c3 import C3
from services.protocols.cure import Cure
from services.protocols.eventual import Eventual
from services.protocols.gentlerain import GentleRain
from services.protocols.saturn import Saturn
from services.region.store import RegionStore

PROTOCOLS: dict[str, type[Protocol]] = {p.name: p for p in (Eventual, Saturn, GentleRain, Cure, C3)}


def protocol_class(name: str) -> type[Protocol]:
    if name not in PROTOCOLS:
        raise NotImplementedError(
            f"protocol {name!r} is not implemented yet (available: {', '.join(sorted(PROTOCOLS))})"
        )
    return PROTOCOLS[name]


def protocol_for(name: str, store: RegionStore) -> Protocol:
    return protocol_class(name)(store)


__all__ = ["PROTOCOLS", "READY_HEALTH", "Protocol", "ReceivingSide", "protocol_class", "protocol_for"]
