"""One shard of a region's store, reached synchronously wherever its Redis Cluster serves it now.

The few readers and writers outside the services' event loops (the tree record that
``epochs.publish`` writes and ``epochs.progress`` reads, the attach-wait metric a scrape reads)
reach one shard at a time. On standalone stores that is one process for good; on a Redis Cluster
the shard may have moved to another master, or its master may have failed over, and they must
follow it as the services do (``store.follows_cluster``): a ``MOVED`` (the command was not run)
is followed at once, and a lost connection moves on to the region's next node, which serves the
shard or names its master. What these callers run is harmless to run twice (a record's fields
set again, a tree event that only wakes the sink).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.exceptions import ConnectionError as StoreConnectionError
from redis.exceptions import MovedError
from redis.exceptions import TimeoutError as StoreTimeoutError

from causal_client import tls, wire
from services.topology import Topology

T = TypeVar("T")


class SyncShard:
    """A shard of ``region``'s store as reached from here (``topology``: the deployment as seen
    from where this runs, e.g. a compose project's published ports)."""

    def __init__(self, topology: Topology, region: str, shard: int = 0, timeout: float = 10.0):
        self.url = topology.redis_url(region, shard)
        self.nodes = topology.store_urls(region) if topology.store.engine == "cluster" else []
        self.timeout = timeout
        self._store: redis.Redis | None = None
        self._lock = threading.Lock()  # (a metrics scrape runs in a thread of its own)

    def run(self, action: Callable[[redis.Redis], T]) -> T:
        """``action`` on a connection to the node that serves the shard now."""
        with self._lock:
            return self._run(action)

    def _run(self, action: Callable[[redis.Redis], T]) -> T:
        for attempt in range(wire.MOVES_FOLLOWED + len(self.nodes) + 1):
            last = attempt == wire.MOVES_FOLLOWED + len(self.nodes)
            try:
                return action(self._connection())
            except MovedError as moved:  # (before a lost connection's kinds: it is neither)
                if last:
                    raise
                self._reach(_with_port(self.url, moved.port))
            except (StoreConnectionError, StoreTimeoutError, OSError):
                if not self.nodes or last:
                    raise
                self._reach(wire.node_after(self.nodes, self.url))
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> SyncShard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> redis.Redis:
        if self._store is None:
            self._store = redis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout,
                **tls.redis_url_options(self.url),
            )  # fmt: skip
        return self._store

    def _reach(self, url: str) -> None:
        self.close()
        self.url = url


def _with_port(url: str, port: int | str) -> str:
    """``url`` with another port: the node a MOVED names, reached at the host this side reaches
    the region's stores at (a region's nodes share its host; the name a node announces may only
    resolve inside the deployment, as a compose service's does)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{netloc}:{port}"))
