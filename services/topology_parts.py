"""The parts of a topology file: regions, serializers and tree edges (services/topology.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

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
    shards: int = Field(default=1, ge=1, le=64)
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
