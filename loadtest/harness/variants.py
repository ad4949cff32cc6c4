"""A protocol's variants ("saturn+serial", "cure+tls"): what a bench that compares protocols may
run one of with, in the environment of its services or the fields of its topology. Shared by the
throughput bench and C3's experiments."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from loadtest.harness.cluster import BenchError


@dataclass(frozen=True)
class Variant:
    """A variant of a protocol, named "protocol+variant": the environment its services run with,
    and fields of the topology it runs with."""

    env: dict[str, str] = field(default_factory=dict)
    topology: dict[str, object] = field(default_factory=dict)
    gateway: bool = False  # the load's clients call the regions' gRPC gateways, not their stores


VARIANTS: dict[str, Variant] = {
    # saturn without §4.4 (concurrent labels wait too)
    "serial": Variant(env={"SATURN_CONCURRENT_APPLY": "0"}),
    # heartbeats leave as soon as due, each on its own
    "eager": Variant(env={"SATURN_HEARTBEAT_SLACK": "0"}),
    # the stores fsync their AOF once a second (Redis's advice for speed) instead of before replying
    "everysec": Variant(topology={"appendfsync": "everysec"}),
    # clients through the gRPC gateway (a Python hop before the gears), as every client was before
    "gateway": Variant(gateway=True),
    # each region's store a one-master Redis Cluster (the engine's own price: hash tags, MOVED
    # checks), and one with a replica that has every write before it is acknowledged (WAIT)
    "cluster": Variant(topology={"store": {"engine": "cluster", "masters": 1, "replicas": 0}}),
    "cluster-replica": Variant(topology={"store": {"engine": "cluster", "masters": 1, "replicas": 1}}),
    # every connection under TLS with the deployment's certificates (docs/OPERATIONS.md, "TLS")
    "tls": Variant(topology={"tls": True}),
}


def split_variant(protocol: str) -> tuple[str, Variant]:
    """'saturn+serial' -> ('saturn', its variant); raises BenchError for an unknown variant."""
    name, _, variant = protocol.partition("+")
    if variant and variant not in VARIANTS:
        raise BenchError(f"unknown variant {variant!r} of {name!r} (known: {', '.join(VARIANTS)})")
    return name, VARIANTS.get(variant, Variant())


@contextlib.contextmanager
def variant_environment(env: dict[str, str]) -> Iterator[None]:
    """The services started inside inherit ``env`` (the launcher passes its environment on)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
