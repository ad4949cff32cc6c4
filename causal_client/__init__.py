"""causal_client: a Python client for a Saturn causally consistent, geo-replicated store."""

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
    StoreTimeout,
    UnknownRegion,
    VersionMismatch,
    WrongPlace,
)
from causal_client.label import Label, LabelType
from causal_client.session_token import SessionToken
from causal_client.strong import ExecuteResult, StrongResult

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
    "StoreTimeout",
    "StrongResult",
    "UnknownRegion",
    "VersionMismatch",
    "WrongPlace",
]
