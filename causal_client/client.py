"""The client library: sessions that carry a Saturn label through every call.

    client = CausalClient.connect("127.0.0.1:7210")      # any region's store: learns every region
    session = client.session("virginia")
    session.write("all", "user:alice", {"name": "Alice"})
    row = session.read("all", "user:alice")
    session.migrate("frankfurt")                          # the causal past comes along

Every reply's label is merged into the session's label, so the session's causal past always
includes what it has read and written: the bug of never sending the label back is not possible.
Calls go straight to the gears inside the regions' stores (causal_client/direct.py), or through
a region's gRPC gateway (``connect_gateway``). Synchronous, so it works from Django, Celery and
(gevent-patched) Locust.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import grpc

from causal_client import direct, peers, tls
from causal_client.claims import owner_region
from causal_client.commands import Command
from causal_client.credentials import bearer_metadata, deployment_secret, store_password
from causal_client.data import Mutation, ReadSpec, Row, Value
from causal_client.errors import (
    InvalidRequest,
    NotReplicatedHere,
    RegionUnavailable,
    UnknownRegion,
    WrongPort,
    from_rpc_error,
)
from causal_client.gateway import OPTIONS, GatewayTransport
from causal_client.label import Label, LabelType
from causal_client.proto import store_pb2, store_pb2_grpc
from causal_client.session_token import SessionToken
from causal_client.strong import ExecuteResult, StrongRegisters, StrongResult
from causal_client.token import TokenRegisters
from causal_client.transport import Transport
from causal_client.wan import Link, Relays

R = TypeVar("R")
MigrationObserver = Callable[[str, str, float], None]
"""Told of each migration a session makes: (from region, to region, seconds it took)."""

DEFAULT_TIMEOUT_S = 10.0
ATTACH_TIMEOUT_S = 60.0
Endpoints = Mapping[str, Sequence[str] | str]
"""Per region, where this client reaches its stores (one ``host:port`` per shard)."""


@dataclass(frozen=True)
class RegionInfo:
    name: str
    site: str
    endpoint: str = ""  # the region's gRPC gateway
    stores: tuple[str, ...] = ()  # the region's stores, one per shard (the store holding it)
    # The same stores for critical metadata (attaches, claims): where a link between this
    # client's site and the region's has a bandwidth, through its relay's priority class.
    meta_stores: tuple[str, ...] = ()
    # A Redis Cluster's nodes (none for standalone stores): each as the region names it, and as
    # this client reaches it for data and for metadata. A shard that moves is looked for there.
    nodes: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True)
class ClaimResult:
    granted: bool  # the key is the caller's
    holder: str  # who holds it ("" when free)


class CausalClient:
    """Knows the regions, holds the connections to them (one transport), and makes sessions.

    Thread-safe: one client is meant to be shared by a process's threads (a threaded web worker,
    a task worker), each with sessions of its own. Every error it raises is a ``CausalError``,
    whatever the threads do meanwhile (shards moving, masters failing over).

    ``site`` is where this client runs: calls to a region at another site are delayed by the
    emulated one-way latency each way (WAN emulation, causal_client/wan.py). ``None`` = no emulation.
    ``secret``: the deployment's credentials, sent with every call (default: ``$SATURN_SECRET``;
    a deployment on loopback may have none). ``gateway``: call the regions' gRPC frontends
    instead of their stores. ``acks``: how many replicas of a store must have a change before it
    counts as made (a Redis Cluster store's ``[store] acknowledge``; what ``connect`` learns).
    """

    def __init__(
        self,
        regions: Sequence[RegionInfo],
        groups: Mapping[str, Sequence[str]] | None = None,
        latencies_ms: Mapping[tuple[str, str], float] | None = None,
        site: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        secret: str | None = None,
        gateway: bool = False,
        vectors: bool = False,
        strong: Mapping[str, object] | None = None,
        acks: int = 0,
    ):
        self.regions = {r.name: r for r in regions}
        self.vectors = vectors  # the deployment runs Cure: sessions keep a vector (label.py)
        strong = strong or {}  # the deployment's `[strong]` settings (Topology.describe)
        self.strong_mode = str(strong.get("mode", "vivace"))
        self.token_hold_ms = float(strong.get("token_hold_ms", 1000.0))  # type: ignore[arg-type]
        secret = deployment_secret(secret)
        self.metadata = bearer_metadata(secret)
        password = store_password(secret)
        self.groups = {g: tuple(members) for g, members in (groups or {}).items()}
        self.latencies_ms = dict(latencies_ms or {})
        self.site = site
        self.timeout = timeout
        self.transport: Transport = (
            GatewayTransport(lambda r: self.region(r).endpoint, self.metadata, timeout)
            if gateway
            else direct.DirectTransport(
                lambda r: self.region(r).stores,
                password,
                timeout,
                vectors,
                meta_stores_of=lambda r: self.region(r).meta_stores or self.region(r).stores,
                acks=acks,
                nodes_of=lambda r: self.region(r).nodes,
            )
        )
        self._links: dict[str, Link] = {}
        self._lock = threading.Lock()

    @classmethod
    def connect(
        cls,
        address: str | Sequence[str],
        site: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        secret: str | None = None,
        endpoints: Endpoints | None = None,
    ) -> CausalClient:
        """Builds a client from any one region's store (``host:port``; it describes the whole
        topology), calling every region's gears directly. Given several stores, the first that
        answers describes it (a node of a Redis Cluster region may be down, its replica
        promoted). ``endpoints``: where this client reaches regions' stores, where that differs
        from where the regions name them (a client outside the containers, through published
        ports)."""
        secret = deployment_secret(secret)
        described = _described(address, store_password(secret), timeout)
        endpoints = endpoints or {}
        relays = Relays(described.get("relays"))  # links with a bandwidth: through their relays
        regions = []
        for r in described["regions"]:
            stores = endpoints.get(r["name"], r["stores"])
            stores = (stores,) if isinstance(stores, str) else tuple(stores)
            if len(stores) != len(r["stores"]):
                raise InvalidRequest(
                    f"endpoints: {len(stores)} store address(es) for region {r['name']!r}, which has "
                    f"{len(r['stores'])} store(s)"
                )
            # Every store as the region names it (a Redis Cluster's MOVED does), and as this
            # client reaches it for data and for critical metadata.
            nodes = tuple(
                (named, relays.route(site, x, "data"), relays.route(site, x, "meta"))
                for named, x in zip(r["stores"], stores, strict=True)
            )
            # Which store holds each shard (rows are routed by the number of shards): one each,
            # or a Redis Cluster's masters holding several.
            placed = [nodes[node] for node in r.get("shards", range(len(stores)))]
            stores, meta = tuple(n[1] for n in placed), tuple(n[2] for n in placed)
            cluster = described.get("store", {}).get("engine") == "cluster"
            regions.append(
                RegionInfo(r["name"], r["site"], r["gateway"], stores, meta, nodes if cluster else ())
            )
        latencies = {(a, b): ms for a, b, ms in described["latencies"]}
        vectors = bool(described.get("traits", {}).get("vectors"))  # the protocol's (services/traits.py)
        groups = described["groups"]
        return cls(
            regions, groups, latencies, site=site, timeout=timeout, secret=secret, vectors=vectors,
            strong=described.get("strong"), acks=int(described.get("store", {}).get("acks", 0)),
        )  # fmt: skip

    @classmethod
    def connect_gateway(
        cls,
        endpoint: str,
        site: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        secret: str | None = None,
        endpoints: Mapping[str, str] | None = None,
    ) -> CausalClient:
        """Builds a client that calls the regions' gRPC gateways (for clients that cannot reach
        the stores), from any one region's gateway. ``endpoints``: gateways, as in ``connect``."""
        with tls.grpc_channel(endpoint, OPTIONS) as channel:
            try:
                reply = store_pb2_grpc.StoreStub(channel).Describe(
                    store_pb2.DescribeRequest(), timeout=timeout, metadata=bearer_metadata(secret)
                )
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
                first = peers.probe(endpoint) if exc.code() != grpc.StatusCode.UNAUTHENTICATED else b""
                hint = peers.guess_peer(first)
                if first and "HTTP/2" not in hint:
                    raise WrongPort(
                        f"{endpoint} is not a region's gateway: it answered {first[:16]!r}{hint}. "
                        "CausalClient.connect_gateway takes a gateway's host:port; a region's store "
                        "takes CausalClient.connect"
                    ) from None
                raise error from None
        endpoints = endpoints or {}
        regions = [RegionInfo(r.name, r.site, endpoints.get(r.name, r.endpoint)) for r in reply.regions]
        groups = {g.name: list(g.regions) for g in reply.groups}
        latencies = {(x.from_site, x.to_site): x.one_way_ms for x in reply.latencies}
        options = {
            "site": site,
            "timeout": timeout,
            "secret": secret,
            "gateway": True,
            "vectors": reply.vectors,
        }
        return cls(regions, groups, latencies, **options)

    def region(self, name: str) -> RegionInfo:
        try:
            return self.regions[name]
        except KeyError:
            raise UnknownRegion(f"unknown region {name!r} (known: {', '.join(self.regions)})") from None

    def link_to(self, region: str) -> Link:
        """The emulated link from this client's site to a region's site."""
        with self._lock:
            if region not in self._links:
                target = self.region(region).site
                if self.site is None or self.site == target:
                    self._links[region] = Link(0.0)
                else:
                    latency = self.latencies_ms.get((self.site, target), 0)
                    self._links[region] = Link(latency, sites=(self.site, target))
            return self._links[region]

    def call_at(self, region: str, action: Callable[[Transport], R]) -> R:
        """``action`` on the transport, paying the emulated WAN to ``region`` each way."""
        link = self.link_to(region)
        link.sleep_one_way()
        try:
            return action(self.transport)
        finally:
            link.sleep_one_way()

    def replicas(self, group: str) -> tuple[str, ...]:
        return self.groups.get(group, ())

    def closest_replica(self, group: str, near: str, elsewhere: bool = False) -> str | None:
        """The region replicating ``group`` nearest to region ``near``: itself if it replicates
        the group (unless ``elsewhere``: a region that refused the group, its topology newer
        than ours), None if no region does. Where a session at ``near`` goes for the group."""
        return self.closest_with([group], near, elsewhere)

    def closest_with(self, groups: Sequence[str], near: str, elsewhere: bool = False) -> str | None:
        """The region replicating every one of ``groups`` nearest to ``near`` (as
        :meth:`closest_replica`): where a transaction over them can run."""
        common = set(self.replicas(groups[0])).intersection(*(self.replicas(g) for g in groups[1:]))
        replicas = [r for r in self.regions if r in common and not (elsewhere and r == near)]
        if not replicas:
            return None
        if near in replicas:
            return near
        here = self.region(near).site
        return min(replicas, key=lambda r: self.latencies_ms.get((here, self.region(r).site), 0))

    def session(
        self,
        region: str,
        label: SessionToken | Label | str | None = None,
        auto_migrate: bool = True,
        on_migrate: MigrationObserver | None = None,
        timeout: float = ATTACH_TIMEOUT_S,
        attach: bool = True,
    ) -> Session:
        """A session attached to ``region``, new or resuming a causal past: a session's
        :attr:`Session.token`, or a bare label (a hand-off: see ``session_token``). Returns once
        that whole past is visible at ``region``:

        - a token made at ``region``: at once, with no call at all (its past was visible here);
        - a token made elsewhere: the session migrates from there (paper §4.3), or, if that region
          cannot be reached, attaches with its label, waiting until every origin has passed it;
        - a bare label: attaches with it (Alg. 1: a migration label made for ``region`` is waited
          for; any other label waits until every origin has passed it).

        ``on_migrate`` is told of every migration (a load test times them); ``timeout`` bounds
        the wait for the past (:class:`StoreTimeout`). ``attach=False`` is deprecated and changes
        nothing: it trusted the caller to know the past was visible at ``region``, which a label
        cannot tell; a token made at ``region`` needs no call anyway."""
        if not attach:
            warnings.warn(
                "attach=False is deprecated and ignored: pass Session.token, which resumes with no "
                "call at the region it was made and waits for the session's past anywhere else",
                DeprecationWarning,
                stacklevel=2,
            )
        self.region(region)  # an UnknownRegion before anything else
        past = SessionToken.parse(label)
        if past.label.is_zero:  # no past, nothing to wait for: no call (sessions start while a
            return Session(self, region, Label.zero(), auto_migrate, on_migrate)  # shard is down)
        if past.region:
            session = Session(self, past.region, past.label, auto_migrate, on_migrate)
            session.migrate(region, timeout)
            return session
        session = Session(self, region, Label.zero(), auto_migrate, on_migrate)
        session._arrive(region, past.label, timeout)
        return session

    @cached_property
    def strong(self) -> StrongRegisters | TokenRegisters:
        """Strong (red) operations as the deployment orders them (``[strong] mode``): registers
        over a majority of the regions (causal_client/strong.py), or a token the regions pass
        in turn (causal_client/token.py)."""
        if self.strong_mode == "token":
            return TokenRegisters(self, self.token_hold_ms)
        return StrongRegisters(self)

    def close(self) -> None:
        if "strong" in self.__dict__:
            self.strong.close()
        self.transport.close()

    def __enter__(self) -> CausalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _described(address: str | Sequence[str], password: str | None, timeout: float) -> dict:
    """The topology as the first of the stores that answers describes it (``WrongPort`` and the
    like at once: a store that answers wrongly is not skipped)."""
    addresses = [address] if isinstance(address, str) else list(address)
    if not addresses:
        raise InvalidRequest("CausalClient.connect: no store address given")
    for i, each in enumerate(addresses):
        try:
            return direct.describe(each, password, timeout)
        except RegionUnavailable:
            if i == len(addresses) - 1:
                raise
    raise AssertionError("unreachable")


class Session:
    """One client's causal session: its label, and the region it is attached to.

    Not thread-safe: one session per logical client (a web session, a Locust user, a task).
    ``auto_migrate``: touching a group not replicated where the session is attached migrates
    it to the closest replica (False: raise :class:`NotReplicatedHere`).
    """

    def __init__(
        self,
        client: CausalClient,
        region: str,
        label: Label,
        auto_migrate: bool = True,
        on_migrate: MigrationObserver | None = None,
    ):
        self.client = client
        self.region = region  # everything the session has seen is visible here
        self.label = label
        self.floor = 0  # the region's time it has read or written at (its reads are snapshots after it)
        self.auto_migrate = auto_migrate
        self.on_migrate = on_migrate
        self._settle()

    def _settle(self) -> None:
        """A migration label vouches for what its session had seen when it was made, at the one
        region it was made for (paper §4.3). Held by a session anywhere else, it would outlive
        that: presented again after the session did more, a region would wait for it alone. So
        a session keeps one only while at its target, and elsewhere as a plain label
        (``Label.as_past``), which a region waits for by stabilization, never less."""
        if self.label.type == LabelType.MIGRATION and self.label.target != self.region:
            self.label = self.label.as_past()

    # -- plumbing ----------------------------------------------------------------------------
    def _call(self, method: str, action: Callable[[Transport], R], region: str | None = None) -> R:
        """One call (``method`` names it, as the gateway's RPC) to ``region`` (default: the
        session's), paying the emulated WAN latency each way."""
        return self.client.call_at(region or self.region, action)

    def _local(self, groups: Sequence[str], action: Callable[[], R]) -> R:
        """Runs ``action`` where every group it touches is replicated: a session that is not
        there migrates first (or raises with ``auto_migrate=False``). A region that refuses a
        group anyway (this client's topology is stale) has written nothing: the gears check
        every part of a call before any write, so the action may run again after moving."""
        known = self.client.groups  # a group it does not know, the region names in its refusal
        missing = [g for g in groups if g in known and self.region not in known[g]]
        if missing:
            self._move_for([g for g in dict.fromkeys(groups) if g in known], NotReplicatedHere(
                f"group {missing[0]!r} is not replicated at region {self.region!r} "
                f"(replicas: {','.join(self.client.replicas(missing[0])) or 'none'})",
                group=missing[0], region=self.region,
            ))  # fmt: skip
        try:
            return action()
        except NotReplicatedHere as exc:
            if not exc.group:  # the gears say why in words; which group, the topology tells
                unknown = [g for g in groups if self.region not in self.client.replicas(g)]
                exc.group, exc.region = (unknown or list(groups))[0], self.region
            self._move_for([exc.group], exc)
            return action()

    def _move_for(self, groups: Sequence[str], refusal: NotReplicatedHere) -> None:
        """Migrates to the closest region replicating all of ``groups`` (one transaction's), or
        raises ``refusal`` (with auto_migrate=False, or where no region replicates them all)."""
        if not self.auto_migrate:
            raise refusal
        target = self.client.closest_with(groups, self.region, elsewhere=True)
        if target is None:
            if len(groups) > 1:
                refusal.args = (f"{refusal} and no region replicates all of {', '.join(groups)}",)
            raise refusal
        self.migrate(target)

    # -- session -----------------------------------------------------------------------------
    @property
    def token(self) -> str:
        """The session as a string (its label and its region), for cookies and tasks:
        ``client.session(region, label=token)`` resumes it anywhere (see ``session_token``)."""
        return SessionToken(self.label, self.region).encode()

    def attach(self, region: str | None = None, timeout: float = ATTACH_TIMEOUT_S) -> None:
        """Attaches to ``region`` (default: the current one) by waiting until every origin has
        passed the session's label there (paper Alg. 1's stabilization): correct from anywhere,
        even when the region that holds the session's past is down. :meth:`migrate` is faster
        where that region answers."""
        self._arrive(region or self.region, self.label.as_past(), timeout)

    def _arrive(self, region: str, label: Label, timeout: float) -> None:
        """Attaches at ``region`` presenting ``label``: the session's own (stabilization) or a
        migration label made for this very move."""
        self.client.region(region)
        self._call("Attach", lambda t: t.attach(region, label, timeout), region)
        if region != self.region:
            self.floor = 0  # times are each region's own
        self.region = region
        self.label = self.label.merge(label)  # a migration label made for here is the session's now
        self._settle()

    def migrate(self, target: str, timeout: float = ATTACH_TIMEOUT_S) -> None:
        """Moves the session to another region (paper §4.3): a migration label made where the
        session is, then an attach there presenting it. If the session's region cannot be
        reached, the attach presents the session's label instead and waits until every origin
        has passed it there (its past may then be unreachable too: a :class:`StoreTimeout` says
        so, never a session without its past)."""
        self.client.region(target)
        if target == self.region:
            return
        started = time.perf_counter()
        origin = self.region
        try:
            ticket = self.prepare_migration(target)
        except RegionUnavailable:
            ticket = self.label.as_past()
        self._arrive(target, ticket, timeout)
        if self.on_migrate is not None:
            self.on_migrate(origin, target, time.perf_counter() - started)

    def prepare_migration(self, target: str) -> Label:
        """The first half of :meth:`migrate`: a migration label made where the session is, for
        whoever attaches at ``target`` next (a hand-off to another process or region). It is a
        ticket for one attach and covers only what the session has seen so far: the session does
        not take it as its label, and should hand off without doing more here."""
        self.client.region(target)
        ticket = self._call("Migrate", lambda t: t.migrate(self.region, self.label, target))
        return ticket.with_vector(self.label.vector)  # Cure: the target waits for the whole vector

    # -- strongly consistent claims (outside causality: no label) ------------------------------
    def claim(self, namespace: str, key: str, holder: str) -> ClaimResult:
        """Claims ``key`` for ``holder`` at the key's owner region (one compare-and-set there, so
        of concurrent claims from any regions exactly one wins). Retrying with the same holder is
        safe. Pays a round trip to the owner region. Not replicated: while the owner region is
        down its keys cannot be claimed, and adding or removing a region moves owners without
        their claims. ``execute(namespace, key, InsertIfAbsent(holder))`` on the strong
        registers has neither problem (Chirp's usernames and reposts use it)."""
        return self._claim(namespace, key, holder, release=False)

    def release_claim(self, namespace: str, key: str, holder: str) -> bool:
        """Gives a claimed key up (only its holder can); True if it was released."""
        return self._claim(namespace, key, holder, release=True).granted

    def _claim(self, namespace: str, key: str, holder: str, release: bool) -> ClaimResult:
        owner = owner_region(list(self.client.regions), namespace, key)
        granted, current = self._call(
            "Claim", lambda t: t.claim(owner, namespace, key, holder, release), region=owner
        )
        return ClaimResult(granted, current)

    # -- strongly consistent registers (Vivace's algorithms; causal_client/strong.py) -------------
    # A strong operation and the causal ones stay causally ordered (RedBlue's red and blue): a
    # value keeps its writer's label, and a session that reads it takes that label into its past,
    # waiting here until what the writer had seen is visible here too.
    def strong_read(self, namespace: str, key: str) -> StrongResult:
        """The register's value, linearizable: a timestamp round trip to the closest majority of
        regions (in the links' critical class), the value usually from this region. Its writer's
        causal past becomes the session's (``result.label``)."""
        result = self.client.strong.read(self.region, namespace, key)
        self._depend_on(result.label)
        return result

    def strong_write(self, namespace: str, key: str, value: str) -> str:
        """Sets the register, linearizably; returns the timestamp it took effect at. The value
        stays here with the session's label, its timestamp goes to a majority;
        ``OutcomeUnknown`` if that was cut short."""
        return self.client.strong.write(self.region, namespace, key, value, self.label.as_past())

    def execute(self, namespace: str, key: str, command: Command) -> ExecuteResult:
        """A read-modify-write of the register (causal_client/commands.py: insert-if-absent,
        compare-and-set, bounded decrement), linearizable: ``Conflict`` when concurrent ones won
        every time (nothing happened), ``OutcomeUnknown`` when its commit was cut short. The
        causal past of the value it read becomes the session's."""
        result = self.client.strong.execute(self.region, namespace, key, command, self.label.as_past())
        self._depend_on(result.label)
        return result

    def _depend_on(self, label: Label) -> None:
        """Takes ``label`` into the session's past, first waiting here until every origin has
        passed it (an attach presenting it), unless it was made here (its writer's past is visible
        here already): what a red operation's writer had seen is then visible to this session. A
        label below the session's is no exception: a remote origin's order is not this region's."""
        if label.is_zero or label.region == self.region:
            return
        self._arrive(self.region, label.as_past(), ATTACH_TIMEOUT_S)

    # -- reads -------------------------------------------------------------------------------
    def read(self, group: str, row: str, columns: Sequence[str] = ()) -> Row:
        """Named columns of a row, or the whole row when none are named."""
        return self._read_one(ReadSpec(group, row, tuple(columns)))

    def slice(
        self, group: str, row: str, limit: int = 40, after: str | None = None, reverse: bool = True
    ) -> Row:
        """A page of a row's sorted columns, newest (greatest) first by default."""
        return self._read_one(ReadSpec(group, row, limit=limit, after=after, reverse=reverse))

    def _read_one(self, spec: ReadSpec) -> Row:
        return self._local([spec.group], lambda: self._read("Read", [spec])[0])

    def _read(self, method: str, specs: Sequence[ReadSpec]) -> list[Row]:
        # A label made here is a time of this region too (a write's ts is its stamp): a session
        # resumed from its token reads at or after its own last write, even one whose parts on
        # other shards are still being settled.
        floor = max(self.floor, self.label.ts if self.label.region == self.region else 0)
        result = self._call(method, lambda t: t.read(self.region, self.label, specs, floor))
        self.label = self.label.merge(result.seen)
        self.floor = max(self.floor, result.floor)
        return result.rows

    def multi_read(self, specs: Sequence[ReadSpec]) -> list[Row]:
        """Several reads as one read-only transaction: the rows are one snapshot of the region
        (never part of an atomic batch, never a row without the causal past of another), at or
        after everything the session has read or written here; results in the same order. One
        round trip usually, four at most; it never waits for a writer."""

        return self._local([s.group for s in specs], lambda: self._read("MultiRead", specs))

    # -- writes ------------------------------------------------------------------------------
    def write(self, group: str, row: str, values: Mapping[str, Value]) -> Label:
        """Sets columns of one row (one update, one label); returns the update's label."""
        return self.apply(Mutation(group, row).update(values))

    def delete(self, group: str, row: str, columns: Sequence[str]) -> Label:
        return self.apply(Mutation(group, row).delete(*columns))

    def increment(self, group: str, row: str, column: str, amount: int = 1) -> Label:
        return self.apply(Mutation(group, row).increment(column, amount))

    def apply(self, mutation: Mutation) -> Label:
        return self._local([mutation.group], lambda: self._write("Write", [mutation]))

    def _write(self, method: str, mutations: Sequence[Mutation], atomic: bool = True) -> Label:
        label = self.label.at_least(self.floor, f"{self.region}/0")
        made = self._call(method, lambda t: t.write(self.region, label, mutations, atomic))
        self.label = self.label.merge(made)
        self.floor = max(self.floor, made.ts)
        return made

    def batch(self, mutations: Sequence[Mutation], atomic: bool = True) -> Label:
        """Several rows as one write-only transaction: all of them become visible together, at
        this region and at every region that replicates them (each sees its part at once), under
        one label; or none does. Over several shards it costs two more round trips inside the
        region. ``atomic=False``: each row its own update and label, written shard by shard
        (cheaper; for writes whose parts need not appear together, such as a timeline fan-out)."""

        return self._local([m.group for m in mutations], lambda: self._write("Batch", mutations, atomic))
