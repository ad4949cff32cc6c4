"""A shard's calls that follow it around a Redis Cluster (``Shard.follow_cluster``): made again
at the node a MOVED names, or at the next node after a lost connection where that is harmless,
and waited out while a failover or a move is under way."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError
from redis.exceptions import ConnectionError as StoreConnectionError

from causal_client import wire
from services.region.lean_redis import StoreUnreachable

T = TypeVar("T")


class FollowsCluster(Protocol):
    """What the decorators use of a shard: its region's nodes, and how it follows a move."""

    nodes: list[str]

    async def follow_cluster(self, error: Exception) -> bool: ...


CLUSTER_DOWN_WAIT_S = 10.0  # how long a call waits out a cluster that is down (a failover under way)
CLUSTER_DOWN_RETRY_S = 0.1


def moved_url(url: str, moved: MovedError) -> str:
    """``url`` (credentials and all) with the host and port a MOVED reply names."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    where = f"{moved.host}:{moved.port}"
    return urlunsplit(parts._replace(netloc=f"{credentials}@{where}" if credentials else where))


def follows_cluster(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A Shard method that follows the shard when a Redis Cluster moved it (``follow_cluster``):
    made again after a MOVED or, as it is harmless to do twice, at the next node after a lost
    connection."""
    return _following(method, again_when_lost=True)


def _following(method: Callable[..., Awaitable[T]], again_when_lost: bool) -> Callable[..., Awaitable[T]]:
    @functools.wraps(method)
    async def following(self: FollowsCluster, *args, **kwargs) -> T:
        tries = wire.MOVES_FOLLOWED + len(self.nodes)
        attempt, down_until = 0, None
        while True:
            try:
                return await method(self, *args, **kwargs)
            except (MovedError, StoreConnectionError, OSError) as exc:  # (MOVED first: an ASK's kind)
                again = await self.follow_cluster(exc)
                harmless = again_when_lost or isinstance(exc, StoreUnreachable)  # nothing was sent
                if not (again or (harmless and self.nodes)) or attempt == tries:
                    raise
                attempt += 1
            except (ClusterDownError, TryAgainError, AskError):
                # A failover or a shard's move under way: nothing was done; again shortly.
                down_until = down_until or time.monotonic() + CLUSTER_DOWN_WAIT_S
                if time.monotonic() > down_until:
                    raise
                await asyncio.sleep(CLUSTER_DOWN_RETRY_S)

    return following


def follows_cluster_once(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """As ``follows_cluster``, for a call that may change something: after a lost connection
    (it may have been made) it is not made again, the next call goes to the next node."""
    return _following(method, again_when_lost=False)
