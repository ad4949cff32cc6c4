"""Calls straight to the gears inside a region's stores: one ``FCALL`` per shard per call, over
redis-py (with hiredis) connection pools, no process in between (the fast path).

The client routes rows to shards itself (``wire.shard_of``, as Redis Cluster clients do), and the
gears check every call, so routing or input mistakes are refused there, never stored. Nothing is
retried blindly: a write whose connection broke may or may not have happened, so it is reported
(``RegionUnavailable``), never sent twice; reads and attaches, which change nothing, are retried
once. Idle connections are checked with a PING before reuse, so a restarted store costs no
failed call.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from causal_client import peers, tls, transactions, wire
from causal_client.credentials import CLIENT_USER
from causal_client.data import Mutation, ReadSpec
from causal_client.errors import (
    AccessDenied,
    OutcomeUnknown,
    RegionUnavailable,
    ServerError,
    StoreTimeout,
    WrongPort,
    from_redis_error,
)
from causal_client.label import Label, LabelType
from causal_client.transactions import ReadResult
from causal_client.transport import Transport

CALL, READ = "SATURN.CALL", "SATURN.READ"  # the stores' gateway commands (services/region/module)
# No CLIENT SETINFO on connecting: the client user may not run it (redis-py 8 names the option
# driver_info, earlier versions lib_name / lib_version).
NO_SETINFO: dict[str, Any] = (
    {"driver_info": None}
    if "driver_info" in inspect.signature(redis.Redis.__init__).parameters
    else {"lib_name": None, "lib_version": None}
)
IDLE_CHECK_S = 1  # a pooled connection idle this long is PINGed before it is used again
ROUND_THREADS = 8  # calls of a transaction's round made at once, per client
ACK_SHARE = 0.8  # of a call's timeout, what its replicas' acknowledgement may take (the rest: the call)


class DirectTransport(Transport):
    """``stores_of(region)``: the region's stores, one ``host:port`` per shard; ``password``: the
    client user's (causal_client/credentials.py), None where the stores want none."""

    def __init__(
        self,
        stores_of: Callable[[str], Sequence[str]],
        password: str | None,
        timeout: float,
        vectors: bool = False,
        meta_stores_of: Callable[[str], Sequence[str]] | None = None,
        acks: int = 0,
        nodes_of: Callable[[str], Sequence[tuple[str, str, str]]] | None = None,
    ):
        """``meta_stores_of``: the same stores for critical metadata (attaches and claims: a link
        with a bandwidth carries them ahead of data where it prioritises; default: the stores).
        ``acks``: replicas that must have a change before it counts as made (a Redis Cluster
        store's, ``[store] acknowledge``). ``nodes_of(region)``: a Redis Cluster store's nodes
        (as the region names them, then as reached for data and for metadata), where a shard is
        followed when it moves (MOVED) or its master is lost; none for standalone stores."""
        self.acks = acks
        self.nodes_of = nodes_of or (lambda region: ())
        self.stores_of = stores_of
        self.meta_stores_of = meta_stores_of or stores_of
        self.password = password
        self.timeout = timeout
        self.vectors = vectors  # Cure: the labels it returns carry what they saw per region
        # Where each shard is reached: (region, meta) → an address per shard; and one pool per
        # address, kept until the client closes. A shard that moves (MOVED, a lost master) only
        # changes its address: a pool is never closed while other threads may be calling
        # through it (closing one under a call in progress broke that call with raw socket
        # errors), and a shard that comes back to a node finds its pool there.
        self._routes: dict[tuple[str, bool], list[str]] = {}
        self._pools: dict[str, redis.Redis] = {}
        self._lock = threading.Lock()
        # A transaction's round calls its shards at once (their waits overlap; redis-py's pools
        # are thread-safe).
        self._rounds = ThreadPoolExecutor(max_workers=ROUND_THREADS, thread_name_prefix="shard-calls")

    def _store(self, region: str, shard: int, meta: bool = False) -> redis.Redis:
        """The pool ``shard`` of ``region`` is reached through now."""
        with self._lock:
            return self._pool(self._route(region, meta)[shard])

    def _route(self, region: str, meta: bool) -> list[str]:
        """Where each of the region's shards is reached now (the lock is held)."""
        route = self._routes.get((region, meta))
        if route is None:
            stores = (self.meta_stores_of if meta else self.stores_of)(region)
            route = self._routes[region, meta] = list(stores)
        return route

    def _pool(self, address: str) -> redis.Redis:
        """The pool of connections to ``address``, made on first use (the lock is held)."""
        pool = self._pools.get(address)
        if pool is None:
            pool = self._pools[address] = connect(address, self.password, self.timeout)
        return pool

    def _gear(
        self,
        region: str,
        shard: int,
        function: str,
        args: list,
        read_only: bool = False,
        retry: bool = False,
        meta: bool = False,
    ):
        nodes = self.nodes_of(region)
        moves = losses = 0
        while True:
            store = self._store(region, shard, meta)
            address = _address(store)
            try:
                return call_gear(
                    store, function, shard, args, read_only, retry or read_only,
                    where=lambda: f"region {region} store {address}",  # noqa: B023 (called at once)
                    acks=0 if read_only else self.acks,
                )  # fmt: skip
            except redis.exceptions.MovedError as moved:
                moves += 1
                if moves > wire.MOVES_FOLLOWED:
                    raise RegionUnavailable(f"region {region} shard {shard} keeps moving: {moved}") from None
                self._move(region, shard, _named(nodes, f"{moved.host}:{moved.port}"))
            except RegionUnavailable as lost:
                # Its master lost: the region's next node serves the shard if it was promoted
                # and names the master that does (MOVED) if not. A call harmless to make twice
                # asks it now; any other is the caller's to make again (its outcome is unknown).
                if not nodes:
                    raise
                self._move(region, shard, _after(nodes, address), unless_moved_from=address)
                losses += 1
                harmless = (retry or read_only) and not isinstance(lost, OutcomeUnknown)
                if not harmless or losses >= len(nodes):
                    raise

    def _move(
        self, region: str, shard: int, node: tuple[str, str, str], unless_moved_from: str | None = None
    ) -> None:
        """Reaches ``shard`` at ``node`` (as named, for data, for metadata) from now on. Calls
        in flight elsewhere keep the pool they took (see ``_routes``). ``unless_moved_from``: a
        guess after a lost connection to that address, made only while the shard is still
        reached there (another thread may have followed a MOVED to where it is meanwhile)."""
        _, data, meta = node
        with self._lock:
            for kind, address in ((False, data), (True, meta)):
                route = self._routes.get((region, kind))
                if route is None or (unless_moved_from is not None and route[shard] != unless_moved_from):
                    continue
                route[shard] = address

    def _run(self, region: str, plan: transactions.Plan):
        """Runs a transaction's plan against the region's shards (transactions.py)."""
        return transactions.run_sync(
            plan,
            lambda c: self._gear(region, c.shard, c.function, c.args, read_only=c.read_only),
            self._rounds,
        )

    def read(self, region: str, label: Label, specs: Sequence[ReadSpec], floor: int = 0) -> ReadResult:
        shards = len(self.stores_of(region))
        return self._run(region, transactions.read_plan(label, specs, shards, floor, self.vectors))

    def write(self, region: str, label: Label, mutations: Sequence[Mutation], atomic: bool = True) -> Label:
        gear_ids = [f"{region}/{k}" for k in range(len(self.stores_of(region)))]
        plan = transactions.write_plan(label, mutations, len(gear_ids), gear_ids, atomic, self.vectors)
        return self._run(region, plan)

    def migrate(self, region: str, label: Label, target: str) -> Label:
        ts = self._gear(region, 0, wire.MIGRATE, [wire.GEARS_API, *wire.label_args(label), target], meta=True)
        return Label(ts=int(ts), src=f"{region}/0", type=LabelType.MIGRATION, target=target)

    def attach(self, region: str, label: Label, timeout: float) -> None:
        """The gear says whether the label's past is visible; while not, block on the region's
        watermark events (raised when the remote proxy delivers), never poll."""
        started = time.monotonic()
        while True:
            # Counts the wait in the region once visible: sending it twice only counts it twice.
            args = wire.attach_args(label, time.monotonic() - started)
            reply = self._gear(region, 0, wire.ATTACH, args, retry=True, meta=True)
            if reply[0] == 1:
                return
            left = started + timeout - time.monotonic()
            if left <= 0:
                raise StoreTimeout(f"label {label} not stable at {region} within {timeout:.1f}s")
            _, last_event, stream = reply
            store = self._store(region, 0, meta=True)
            try:
                block_ms = max(1, int(min(wire.ATTACH_SLICE_S, left) * 1000))
                store.xread({stream: last_event}, count=1, block=block_ms)
            except redis.RedisError as exc:
                raise from_redis_error(exc, f"region {region} store {_address(store)}") from None

    def claim(self, region: str, namespace: str, key: str, holder: str, release: bool) -> tuple[bool, str]:
        args = [wire.GEARS_API, namespace, key, holder, int(release)]
        granted, current = self._gear(region, 0, wire.CLAIM, args, meta=True)
        return granted == 1, current.decode()

    def register_call(
        self, region: str, namespace: str, key: str, function: str, args: list, meta: bool
    ) -> list:
        shards = len(self.stores_of(region))
        shard = zlib.crc32(f"{namespace}\x00{key}".encode()) % shards
        read_only = function in (wire.STRONG_TS, wire.STRONG_DATA)
        return self._gear(
            region, shard, function, [wire.GEARS_API, namespace, key, *args], read_only, meta=meta
        )

    def red_call(self, region: str, function: str, args: list, meta: bool) -> list:
        return self._gear(region, 0, function, [wire.GEARS_API, *args], meta=meta)

    def close(self) -> None:
        self._rounds.shutdown(wait=False)
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
            self._routes.clear()


def _address(store: redis.Redis) -> str:
    kwargs = store.connection_pool.connection_kwargs
    return f"{kwargs.get('host')}:{kwargs.get('port')}"


def _named(nodes: Sequence[tuple[str, str, str]], named: str) -> tuple[str, str, str]:
    """The node a MOVED names (one the region does not list is reached as named)."""
    return next((n for n in nodes if n[0] == named), (named, named, named))


def _after(nodes: Sequence[tuple[str, str, str]], reached: str) -> tuple[str, str, str]:
    """The node after the one reached at ``reached`` (for data or metadata)."""
    here = next((i for i, n in enumerate(nodes) if reached in n[1:]), -1)
    return nodes[(here + 1) % len(nodes)]


def connect(address: str, password: str | None, timeout: float, single: bool = False) -> redis.Redis:
    """A pool of connections to one store (``host:port``) as the client user, retrying nothing
    by itself (``single``: one connection, whose modes hold for every call)."""
    host, _, port = address.rpartition(":")
    return redis.Redis(
        host=host, port=int(port), username=CLIENT_USER if password else None, password=password,
        socket_timeout=timeout,
        socket_connect_timeout=min(timeout, 5.0), retry=Retry(NoBackoff(), 0),
        health_check_interval=IDLE_CHECK_S, single_connection_client=single, **NO_SETINFO,
        **tls.redis_options(),  # type: ignore[arg-type]
    )  # fmt: skip


def call_gear(
    store: redis.Redis,
    function: str,
    shard: int,
    args: list,
    read_only: bool,
    retry: bool,
    where: Callable[[], str],
    acks: int = 0,
):
    """One gear call to one shard of a region (its one key: the shard's hash tag), through the
    store's gateway module (``SATURN.READ`` for a gear that only reads), sent again once if the
    connection broke and ``retry`` says that doing it twice is harmless. ``where`` names the
    store in an error (built only then: calls are the hot path). ``acks``: replicas that must
    have what the call changed before it returns (``WAIT`` on the same connection, in the same
    round trip); a change they do not confirm in time is an unknown outcome: the master has it,
    and a failover before its replica has it would lose it."""
    tag = wire.shard_tag(shard)
    command = (READ if read_only else CALL, function, 1, tag, *args)
    for attempt in (1, 2):
        try:
            if not acks:
                return store.execute_command(*command)
            return _acknowledged(store, command, acks, where)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if retry and attempt == 1 and not isinstance(exc, redis.AuthenticationError):
                continue
            error = from_redis_error(exc, where())
            if not retry and not isinstance(error, AccessDenied) and not _never_sent(exc):
                raise OutcomeUnknown(f"{error} (the change may or may not have been made)") from None
            raise error from None
        except redis.exceptions.MovedError:
            raise  # the call was not made: the caller follows the shard (DirectTransport._gear)
        except redis.RedisError as exc:
            raise from_redis_error(exc, where()) from None
    raise AssertionError("unreachable")


def _never_sent(exc: redis.RedisError) -> bool:
    """Whether a call that failed surely made no change: the connection it was to go on could
    not be made (redis-py's "Error … connecting to …", "Timeout connecting to server"), or the
    store refused it while it loads its data after a restart (``LOADING``). Anything else, a
    connection lost or a reply late after the call was sent, leaves its outcome unknown."""
    return isinstance(exc, redis.exceptions.BusyLoadingError) or "connecting to " in str(exc)


def _acknowledged(store: redis.Redis, command: tuple, acks: int, where: Callable[[], str]):
    """A call and a ``WAIT`` for ``acks`` replicas, pipelined on one connection."""
    timeout = store.connection_pool.connection_kwargs.get("socket_timeout") or 5.0
    pipe = store.pipeline(transaction=False)
    pipe.execute_command(*command)
    pipe.execute_command("WAIT", acks, max(1, int(timeout * 1000 * ACK_SHARE)))
    reply, confirmed = pipe.execute(raise_on_error=False)  # errors as they came (not re-worded)
    for outcome in (reply, confirmed):
        if isinstance(outcome, Exception):
            raise outcome
    if int(confirmed) < acks:
        raise OutcomeUnknown(
            f"{where()}: the change is made at the master, but no replica confirmed it within "
            f"{timeout * ACK_SHARE:.1f}s: a failover now could lose it"
        )
    return reply


def describe(address: str, password: str | None, timeout: float) -> dict:
    """What the region whose store is at ``address`` tells of the whole topology. ``WrongPort``
    if something other than a store answers there.

    Every shard keeps a copy (services/region/store.py, ``install``); shard 0's is asked first.
    On a Redis Cluster a node that does not serve shard 0 names the one that does (MOVED),
    which is asked at the host ``address`` names (a region's nodes share its host, and the name
    a node announces may resolve only inside the deployment); a replica answers for its
    master's shards itself (READONLY). While shard 0 is out of reach (its master down and no
    replica promoted yet) the next shards' copies are asked, up to the first shard the region
    does not have, so that a client connects while any one node of the region is down. Nothing
    listening at ``address`` itself is reported at once (the caller asks its next store)."""
    try:
        return _describe_shard(address, 0, password, timeout)
    except _OutOfReach as out_of_reach:
        first = out_of_reach
    for shard in range(1, wire.MAX_SHARDS):
        try:
            return _describe_shard(address, shard, password, timeout)
        except _OutOfReach:
            continue
        except (RegionUnavailable, ServerError):
            break  # no such shard (UNCONFIGURED), or the node cannot answer
    raise RegionUnavailable(str(first)) from None


class _Unreachable(RegionUnavailable):
    """Nothing answers at the address asked."""


class _OutOfReach(RegionUnavailable):
    """The shard asked for is out of reach for now: its master is down (a MOVED names a node
    where nothing answers), or the cluster says it serves it nowhere yet (a failover)."""


def _describe_shard(address: str, shard: int, password: str | None, timeout: float) -> dict:
    """``shard``'s copy of the topology, following MOVED from ``address``."""
    at = address
    for _ in range(wire.MOVES_FOLLOWED + 1):
        try:
            return _describe_at(at, shard, password, timeout, first=at == address and shard == 0)
        except redis.exceptions.MovedError as moved:
            at = f"{address.rpartition(':')[0]}:{moved.port}"
        except _Unreachable as exc:
            if at == address:
                raise
            raise _OutOfReach(f"store {address}: shard {shard} is at {at}, down: {exc}") from None
    raise RegionUnavailable(f"store {address}: shard {shard} keeps moving; the topology cannot be read")


def _describe_at(address: str, shard: int, password: str | None, timeout: float, first: bool) -> dict:
    """One describe call at one node. ``first``: the address the caller gave, whose failure may
    mean it is not a store at all (``WrongPort``, by a probe)."""

    def where() -> str:
        return f"store {address}"

    store = None
    try:
        store = _replica_reading(address, password, timeout, where)
        try:
            reply = store.execute_command(READ, wire.DESCRIBE, 1, wire.shard_tag(shard), wire.GEARS_API)
        except redis.exceptions.MovedError:
            raise  # the caller follows it
        except (redis.exceptions.ClusterDownError, redis.exceptions.TryAgainError) as exc:
            raise _OutOfReach(f"{where()}: shard {shard}: {exc}") from None
        except redis.RedisError as exc:
            raise from_redis_error(exc, where()) from None
        if reply is None:
            raise ServerError(f"{where()}: shard {shard} holds no topology")
        return json.loads(reply)
    except (ServerError, RegionUnavailable) as exc:
        if not first or isinstance(exc, _OutOfReach):
            raise
        if (tls_failure := _tls_failure(address, exc)) is not None:
            raise tls_failure from exc
        probed = peers.probe(address)
        if not probed or probed[:1] in b"*+-$:":  # nothing there, or a Redis: the error stands
            raise
        raise WrongPort(
            f"{address} is not a region's store: it answered {probed[:16]!r}{peers.guess_peer(probed)}. "
            "CausalClient.connect takes a store's host:port (a topology's client_address, or "
            "`python -m services.launcher status`); a region's gRPC gateway takes "
            "CausalClient.connect_gateway"
        ) from exc
    finally:
        if store is not None:
            store.close()


def _tls_failure(address: str, exc: Exception) -> tls.TlsError | None:
    """What TLS has to do with a store that could not be reached, if anything: a TLS port and
    this client without TLS, or a handshake that failed for a cause its text names."""
    if tls.from_env() is None:
        host, _, port = address.rpartition(":")
        if port.isdigit() and tls.speaks_tls(host, int(port)):
            return tls.PlaintextPeer(
                f"store {address} speaks TLS and this client runs without it: give it the deployment's "
                f"certificates (${tls.TLS_DIR_ENV}, with ca.pem, client.pem and client.key)"
            )
        return None
    named = tls.recognise(str(exc), f"store {address}")
    host, _, port = address.rpartition(":")
    if named is None and port.isdigit():
        named = tls.why_refused(host, int(port))  # its alert may have come after our first write
    return named


def _replica_reading(
    address: str, password: str | None, timeout: float, where: Callable[[], str]
) -> redis.Redis:
    """One connection to ``address`` on which a Redis Cluster replica answers reads of its
    master's shards (READONLY); nothing answering is ``_Unreachable``. A standalone store has
    no such mode, and a client user of an older deployment may not ask: it reads as before."""
    try:
        store = connect(address, password, timeout, single=True)  # (it connects at once)
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        error = from_redis_error(exc, where())
        raise (error if isinstance(error, AccessDenied) else _Unreachable(str(error))) from None
    except redis.RedisError as exc:  # something answered, not as a store would
        raise from_redis_error(exc, where()) from None
    try:
        store.execute_command("READONLY")
    except redis.ResponseError:
        pass
    except redis.RedisError as exc:
        store.close()
        raise from_redis_error(exc, where()) from None
    return store
