"""causal_client: a Python client for a Saturn causally consistent, geo-replicated store."""

from causal_client.client import CausalClient, ClaimResult, RegionInfo, Session
from causal_client.data import Cell, Mutation, ReadSpec, Row
from causal_client.errors import (
    AccessDenied,
    CausalError,
    InvalidLabel,
    InvalidRequest,
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

__all__ = [
    "AccessDenied",
    "CausalClient",
    "CausalError",
    "Cell",
    "ClaimResult",
    "InvalidLabel",
    "InvalidRequest",
    "Label",
    "LabelType",
    "Mutation",
    "NotReplicatedHere",
    "OutcomeUnknown",
    "ReadSpec",
    "RegionInfo",
    "RegionUnavailable",
    "Row",
    "ServerError",
    "Session",
    "SessionToken",
    "StoreTimeout",
    "UnknownRegion",
    "VersionMismatch",
    "WrongPlace",
]
