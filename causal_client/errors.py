"""Typed errors of the client library, translated from gRPC status codes.

Applications catch these, never ``grpc.RpcError``: each says what went wrong in words.
"""

from __future__ import annotations

import grpc

SECRET_ENV = "SATURN_SECRET"  # where a client finds the deployment's secret when given none


class CausalError(Exception):
    """Base class of every error this library raises."""


class InvalidRequest(CausalError):
    """The request was malformed: empty key, oversized value, unknown group, ... (not retryable)."""


class InvalidLabel(InvalidRequest):
    """A label (or label token) is malformed or impossible."""


class NotReplicatedHere(CausalError):
    """The key's replication group is not stored at the region the session is attached to."""

    def __init__(self, message: str, group: str = "", region: str = ""):
        super().__init__(message)
        self.group = group
        self.region = region


class UnknownRegion(CausalError):
    """A region name that the topology does not have."""


class AccessDenied(CausalError):
    """The region wants the deployment's credentials, and the call had none or wrong ones."""


class RegionUnavailable(CausalError):
    """The region's frontend cannot be reached (down, restarting, or network trouble)."""


class StoreTimeout(CausalError):
    """The call did not finish within its deadline (e.g. an attach still waiting for stability)."""


class ServerError(CausalError):
    """The region failed internally; the message carries the server's explanation."""


# Marker the server puts at the start of FAILED_PRECONDITION details for a non-local group.
NOT_REPLICATED_MARKER = "not-replicated:"


def from_rpc_error(exc: grpc.RpcError) -> CausalError:
    """Maps a gRPC error to the typed exception a caller can act on."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else "") or str(exc)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        if details.startswith("label:"):
            return InvalidLabel(details)
        return InvalidRequest(details)
    if code == grpc.StatusCode.FAILED_PRECONDITION and details.startswith(NOT_REPLICATED_MARKER):
        _, group, region, message = details.split(":", 3)
        return NotReplicatedHere(message.strip(), group=group, region=region)
    if code == grpc.StatusCode.NOT_FOUND:
        return UnknownRegion(details)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AccessDenied(f"{details} (the deployment's secret: CausalClient(secret=...) or ${SECRET_ENV})")
    if code == grpc.StatusCode.UNAVAILABLE:
        return RegionUnavailable(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return StoreTimeout(details or "deadline exceeded")
    return ServerError(f"{code.name}: {details}")
