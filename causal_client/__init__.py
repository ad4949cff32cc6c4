"""causal_client: a Python client for a Saturn causally consistent, geo-replicated store.

The names below are imported when first used (PEP 562), so that a module of the package that
needs none of them (``causal_client.tls`` in a container's health check) imports fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from causal_client.client import CausalClient, ClaimResult, RegionInfo, Session
    from causal_client.commands import (
        BadCommand,
        Command,
        CommandResult,
        CompareAndSet,
        Decrement,
        InsertIfAbsent,
        Prepend,
    )
    from causal_client.data import Cell, Mutation, ReadSpec, Row
    from causal_client.errors import (
        AccessDenied,
        CausalError,
        Conflict,
        InvalidLabel,
        InvalidRequest,
        NoQuorum,
        NotReplicatedHere,
        OutcomeUnknown,
        RegionUnavailable,
        ServerError,
        StoreFull,
        StoreTimeout,
        UnknownRegion,
        VersionMismatch,
        WrongPlace,
    )
    from causal_client.label import Label, LabelType
    from causal_client.session_token import SessionToken
    from causal_client.strong import ExecuteResult, StrongResult, execute_settled

_HOME = {
    "AccessDenied": "causal_client.errors",
    "BadCommand": "causal_client.commands",
    "CausalClient": "causal_client.client",
    "CausalError": "causal_client.errors",
    "Cell": "causal_client.data",
    "ClaimResult": "causal_client.client",
    "Command": "causal_client.commands",
    "CommandResult": "causal_client.commands",
    "CompareAndSet": "causal_client.commands",
    "Conflict": "causal_client.errors",
    "Decrement": "causal_client.commands",
    "ExecuteResult": "causal_client.strong",
    "InsertIfAbsent": "causal_client.commands",
    "InvalidLabel": "causal_client.errors",
    "InvalidRequest": "causal_client.errors",
    "Label": "causal_client.label",
    "LabelType": "causal_client.label",
    "Mutation": "causal_client.data",
    "NoQuorum": "causal_client.errors",
    "NotReplicatedHere": "causal_client.errors",
    "OutcomeUnknown": "causal_client.errors",
    "Prepend": "causal_client.commands",
    "ReadSpec": "causal_client.data",
    "RegionInfo": "causal_client.client",
    "RegionUnavailable": "causal_client.errors",
    "Row": "causal_client.data",
    "ServerError": "causal_client.errors",
    "StoreFull": "causal_client.errors",
    "Session": "causal_client.client",
    "SessionToken": "causal_client.session_token",
    "StoreTimeout": "causal_client.errors",
    "StrongResult": "causal_client.strong",
    "execute_settled": "causal_client.strong",
    "UnknownRegion": "causal_client.errors",
    "VersionMismatch": "causal_client.errors",
    "WrongPlace": "causal_client.errors",
}

__all__ = [
    "AccessDenied",
    "BadCommand",
    "CausalClient",
    "CausalError",
    "Cell",
    "ClaimResult",
    "Command",
    "CommandResult",
    "CompareAndSet",
    "Conflict",
    "Decrement",
    "ExecuteResult",
    "InsertIfAbsent",
    "InvalidLabel",
    "InvalidRequest",
    "Label",
    "LabelType",
    "Mutation",
    "NoQuorum",
    "NotReplicatedHere",
    "OutcomeUnknown",
    "Prepend",
    "ReadSpec",
    "RegionInfo",
    "RegionUnavailable",
    "Row",
    "ServerError",
    "Session",
    "SessionToken",
    "StoreFull",
    "StoreTimeout",
    "StrongResult",
    "UnknownRegion",
    "VersionMismatch",
    "WrongPlace",
    "execute_settled",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'causal_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
