"""Typed errors of the client library, translated from gRPC status codes.

Applications catch these, never ``grpc.RpcError``: each says what went wrong in words.
"""

from __future__ import annotations

import grpc
import redis

SECRET_ENV = "SATURN_SECRET"  # where a client finds the deployment's secret when given none
SECRET_HINT = f"the deployment's secret: CausalClient(secret=...) or ${SECRET_ENV}"


class CausalError(Exception):
    """Base class of every error this library raises. ``retryable``: whether the same call may
    succeed later (a region restarting, a deadline); a bad request fails again."""

    retryable = False


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

    retryable = True


class OutcomeUnknown(RegionUnavailable):
    """A call that changes data lost its connection before the reply: it may or may not have
    happened. Not to be retried blindly (an increment would count twice); a caller whose
    change is idempotent (setting the same cells again) may."""

    retryable = False


class NoQuorum(RegionUnavailable):
    """A strong operation could not reach a majority of the register's regions in time; the
    message (and ``missing``) name those that did not answer. Nothing is known to have changed:
    a write or a read-modify-write that got this far may still take effect (see each method)."""

    def __init__(self, message: str, missing: tuple[str, ...] = ()):
        super().__init__(message)
        self.missing = missing


class Conflict(CausalError):
    """A strong operation kept losing to concurrent ones on the same register (their timestamps
    overtook it) and gave up; it did not take effect. It may be sent again."""

    retryable = True


class StoreTimeout(CausalError):
    """The call did not finish within its deadline (e.g. an attach still waiting for stability)."""

    retryable = True


class VersionMismatch(CausalError):
    """The region's gears speak another API version than this client library."""


class TransactionAborted(CausalError):
    """An atomic batch over several shards was aborted before it committed (its client took so
    long that the region's sweeper gave up on it): nothing of it was written, anywhere. It may
    be sent again."""

    retryable = True


class WrongPlace(InvalidRequest):
    """A row or claim sent to a shard or region that does not hold it (a client routing bug)."""


class WrongPort(InvalidRequest):
    """The address given is not the kind of port asked for (a gateway's or a web app's port
    given where a region's store is wanted); the message says what answered there."""


class StoreFull(CausalError):
    """The region's store refuses writes for want of space: it is at its memory limit
    (``maxmemory``), or its append-only file could not be written (a full disk). The write was
    refused before it ran: nothing was written. Reads still work; writes work again by
    themselves once the store has room, so it may be sent again later."""

    retryable = True


class ServerError(CausalError):
    """The region failed internally; the message carries the server's explanation."""


def retryable_errors() -> tuple[type[CausalError], ...]:
    """Every error class for which a retry can help (``retryable``), for retry policies that
    are keyed on classes (Celery's ``autoretry_for``)."""
    found, todo = [], [CausalError]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.retryable:
            found.append(cls)
    return tuple(found)


# The gears' error codes (the first word of a gear's error reply) and what each means here. The
# Lua library gets these names from this table (services/region/gears.py): one list of codes.
GEAR_ERRORS: dict[str, type[CausalError]] = {
    "INVALID": InvalidRequest,
    "LABEL": InvalidLabel,
    "TYPE": InvalidRequest,  # a set on a counter column, an increment on a value column
    "WIDE": InvalidRequest,  # a whole-row read of a row wider than a reply may carry
    "NOTHERE": NotReplicatedHere,
    "UNKNOWNREGION": UnknownRegion,
    "WRONGSHARD": WrongPlace,
    "NOTOWNER": WrongPlace,
    "VERSION": VersionMismatch,
    "UNCONFIGURED": RegionUnavailable,  # the store is up, its region's services not yet
    "MOVING": RegionUnavailable,  # the shard is moving to another master of its cluster: shortly
    "ABORTED": TransactionAborted,
    "TOOOLD": StoreTimeout,  # a read-only transaction outlived the versions it reads (it restarts)
}


NO_GEARS = "Function not found"  # Redis's answer while a store has no gears' library yet


def from_redis_error(exc: Exception, where: str) -> CausalError:
    """Maps a redis-py error from a direct call (``where``: which store) to a typed exception."""
    text = str(exc)
    refused = isinstance(exc, (redis.AuthenticationError, redis.exceptions.NoPermissionError))
    if refused or text.startswith(("NOAUTH", "WRONGPASS", "AUTH <password> called without")):
        return AccessDenied(f"{where}: missing or wrong credentials: {text} ({SECRET_HINT})")
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return RegionUnavailable(f"{where}: {text}")
    busy = (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError, redis.exceptions.AskError)
    if isinstance(exc, busy):
        return RegionUnavailable(f"{where}: the store's cluster is failing over or moving a shard: {text}")
    if text.startswith(NO_GEARS):
        return RegionUnavailable(f"{where}: the store has no gears yet (its region is starting)")
    if (full := store_refusal(exc, where)) is not None:
        return full
    if isinstance(exc, redis.ResponseError):
        return gear_error(text)
    return ServerError(f"{where}: {text}")


# Redis's refusals for want of space: "OOM command not allowed when used memory > 'maxmemory'",
# "MISCONF Errors writing to the AOF file: No space left on device".
STORE_FULL = ("OOM ", "MISCONF ")


FULL_WORDS = "the store is full"


def store_refusal(exc: Exception, where: str) -> StoreFull | None:
    """``StoreFull`` if redis-py's ``exc`` is the store refusing a write for want of space."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):  # redis-py took the "OOM " off
        return store_full(where, f"OOM {exc}")
    return store_full(where, str(exc)) if str(exc).startswith(STORE_FULL) else None


def store_full(where: str, text: str) -> StoreFull:
    why = "its memory limit" if text.startswith("OOM") else "a disk it cannot write"
    return StoreFull(f"{where}: {FULL_WORDS} ({why}: {text}); nothing was written, and writes "
                     "resume by themselves once it has room")  # fmt: skip


def code_of(error: CausalError) -> str | None:
    """The gears' code of an error: the one it came with, or the first listed for its class."""
    return getattr(error, "gear_code", None) or next(
        (code for code, cls in GEAR_ERRORS.items() if type(error) is cls), None
    )


def gear_error(reply: str) -> CausalError:
    """The typed exception for a gear's error reply ("<CODE> <message>"), or the store's own
    refusal for want of space."""
    if reply.startswith(STORE_FULL):
        return store_full("the store", reply)
    code, _, message = reply.partition(" ")
    if code not in GEAR_ERRORS:
        return ServerError(reply)
    error = GEAR_ERRORS[code](message)
    error.gear_code = code  # type: ignore[attr-defined]  # passed on as it came (the gateway)
    return error


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
    if code == grpc.StatusCode.FAILED_PRECONDITION and details.partition(" ")[0] in GEAR_ERRORS:
        return gear_error(details)  # the gateway passes the gears' code on (wrong place, version)
    if code == grpc.StatusCode.NOT_FOUND:
        return UnknownRegion(details)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AccessDenied(f"{details} ({SECRET_HINT})")
    if code == grpc.StatusCode.UNAVAILABLE:
        return RegionUnavailable(details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return StoreTimeout(details or "deadline exceeded")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and FULL_WORDS in details:  # (not gRPC's own limits)
        return StoreFull(details)
    return ServerError(f"{code.name}: {details}")
