"""The parts of a topology file: regions, serializers and tree edges (services/topology.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from causal_client.wire import MAX_SHARDS

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
HOST_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9.:_-]{0,251}[A-Za-z0-9])?$"  # a DNS name or an IP address
MAX_REPLICAS = 3


class StrictModel(BaseModel):
    """A part of a topology file: unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RegionPorts(StrictModel):
    frontend: int | None = Field(default=None, ge=1, le=65535)
    bulk: int | None = Field(default=None, ge=1, le=65535)
    metrics: int | None = Field(default=None, ge=1, le=65535)
    redis: int | None = Field(default=None, ge=1, le=65535, description="first shard's port")
    web: int | None = Field(default=None, ge=1, le=65535, description="the web app (HTTP)")
    broker: int | None = Field(default=None, ge=1, le=65535, description="the web app's Celery broker")


class Region(StrictModel):
    name: str = Field(pattern=NAME_PATTERN)
    site: str = Field(pattern=NAME_PATTERN)
    host: str | None = Field(default=None, pattern=HOST_PATTERN, description="where peers reach it")
    shards: int = Field(default=1, ge=1, le=MAX_SHARDS)
    frontends: int = Field(default=1, ge=1, le=32, description="frontend processes (SO_REUSEPORT)")
    ports: RegionPorts = RegionPorts()


class Serializer(StrictModel):
    name: str = Field(pattern=NAME_PATTERN)
    site: str = Field(pattern=NAME_PATTERN)
    host: str | None = Field(default=None, pattern=HOST_PATTERN, description="where peers reach it")
    port: int | None = Field(default=None, ge=1, le=65535)
    # A replica group at its site (serializer.py): labels keep flowing in the tree's order when
    # one replica dies. Replica r listens on the serializer's port + r * (number of serializers).
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)


class TreeEdge(StrictModel):
    a: str
    b: str
    delay_ms: float = Field(default=0.0, ge=0)


def no_duplicates(what: str, names: list[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{what}: duplicate names {dupes}")


MAX_STORE_NODES = 10  # a region's Redis processes: its port block has room for ten


class StoreSettings(StrictModel):
    """The ``[store]`` table: what a region's store is. ``standalone``: one Redis per shard, each
    made durable by its AOF and restarted from it when it dies. ``cluster``: a Redis Cluster per
    region of ``masters`` masters with ``replicas`` replicas each, the shards spread over the
    masters (shard k's keys carry the hash tag ``{sk}``: one slot each), so that a region can
    outgrow one host, a master's death is survived by promoting its replica, and shards move
    between masters while the region serves."""

    engine: Literal["standalone", "cluster"] = "standalone"
    masters: int = Field(default=1, ge=1, le=MAX_STORE_NODES)
    replicas: int = Field(default=1, ge=0, le=MAX_STORE_NODES - 1)
    #: how long a master may be unreachable before its replica is promoted (Redis's
    #: ``cluster-node-timeout``): a failover takes about this plus an election
    node_timeout_ms: int = Field(default=2000, ge=100, le=60_000)
    #: when a write is acknowledged: "replica", once a replica has it too (Redis's WAIT), so
    #: that promoting the replica loses nothing acknowledged; "master", at once (faster; a
    #: master that dies takes its last writes with it)
    acknowledge: Literal["replica", "master"] = "replica"
    #: a store refuses clients' writes (StoreFull) while its disk has less than this free, in MB
    #: (0: never), so that a full disk is an error clients are told, not a store that exits
    #: (services/region/module/saturn_calls.c)
    min_free_mb: int = Field(default=32, ge=0, le=1_000_000)

    @property
    def acks(self) -> int:
        """How many replicas must have a write before it is acknowledged."""
        return int(self.engine == "cluster" and self.replicas > 0 and self.acknowledge == "replica")

    @property
    def nodes_per_region(self) -> int | None:
        """A cluster region's Redis processes (None: standalone, one per shard)."""
        return self.masters * (1 + self.replicas) if self.engine == "cluster" else None
