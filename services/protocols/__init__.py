"""Consistency protocols as plug-ins over one data path (docs/PROTOCOLS.md).

What a protocol is (tree or not, vectors, attach rule...) is its row of the traits table
(services/traits.py); how its receiver makes remote updates visible is its ``Protocol`` subclass,
named by the row and imported here only when asked for. Bulk transfer and the frontends know no
protocol by name.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from services.probes import READY_HEALTH
from services.protocols.base import Protocol, ReceivingSide
from services.region.store import RegionStore
from services.traits import TRAITS, traits_of


class _Implementations(Mapping[str, type[Protocol]]):
    """Every protocol of the traits table by name, its class imported at first use (a row added
    later, a test's toy protocol, is found too)."""

    def __getitem__(self, name: str) -> type[Protocol]:
        if name not in TRAITS:
            raise KeyError(name)
        module, _, attribute = traits_of(name).implementation.partition(":")
        found = getattr(importlib.import_module(module), attribute)
        if not (isinstance(found, type) and issubclass(found, Protocol)):
            raise TypeError(f"{traits_of(name).implementation} is not a Protocol subclass")
        return found

    def __iter__(self):
        return iter(TRAITS)

    def __len__(self) -> int:
        return len(TRAITS)


PROTOCOLS: Mapping[str, type[Protocol]] = _Implementations()


def protocol_class(name: str) -> type[Protocol]:
    if name not in PROTOCOLS:
        raise NotImplementedError(
            f"protocol {name!r} is not implemented yet (available: {', '.join(sorted(PROTOCOLS))})"
        )
    return PROTOCOLS[name]


def protocol_for(name: str, store: RegionStore) -> Protocol:
    return protocol_class(name)(store)


__all__ = ["PROTOCOLS", "READY_HEALTH", "Protocol", "ReceivingSide", "protocol_class", "protocol_for"]
