"""Protocols are rows of a traits table (services/traits.py), not names compared everywhere: a
toy protocol registered as one module and one row validates in a topology, gets a process plan,
configures the gears by its traits and is described to clients; and no code outside the table
and the protocols' own modules compares a protocol's name."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
import redis
from helpers.topologies import TOPOLOGIES
from helpers.toy_protocol import TOY, Toy

from causal_client import wire
from services import plan
from services.protocols import PROTOCOLS, protocol_class
from services.region import gears
from services.region.store import RegionStore
from services.topology import Topology, TopologyError
from services.traits import TRAITS, Traits, register

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy():
    register(TOY)
    try:
        yield TOY
    finally:
        TRAITS.pop("toy", None)


def two_regions(protocol: str) -> Topology:
    data = Topology.load(TOPOLOGIES / "two-region.toml").model_dump()
    return Topology.from_dict({**data, "protocol": protocol, "serializers": [], "tree": []}, source="test")


def test_a_toy_protocol_is_one_class_and_one_row(toy):
    topology = two_regions("toy")
    assert topology.traits is TOY
    assert PROTOCOLS["toy"] is Toy and protocol_class("toy") is Toy
    assert "toy" in list(PROTOCOLS)
    described = topology.describe()
    assert described["protocol"] == "toy"
    assert described["traits"] == {
        "name": "toy", "tree": False, "emits_labels": False, "vectors": True, "attach": "vector",
        "migration_label": False,
    }  # fmt: skip
    layout = plan.Layout(python="python", topology_file=ROOT / "run" / "topology.json", data_dir=ROOT / "run",
                         redis_server="redis-server", redis_module="calls.so")  # fmt: skip
    names = [spec.name for spec in plan.processes(topology, layout)]
    assert not [n for n in names if "serializer" in n or "label-sink" in n], names


@pytest.mark.cluster
def test_the_gears_are_configured_by_traits(toy, redis_url):
    topology = two_regions("toy")
    region = topology.region_names[0]

    async def install() -> dict[bytes, bytes]:
        store = RegionStore(topology, region, urls=[redis_url])
        try:
            await store.install()
        finally:
            await store.close()
        return redis.Redis.from_url(redis_url).hgetall(gears.shard_key(gears.CONFIG_KEY, wire.shard_tag(0)))

    config = asyncio.run(install())
    assert (config[b"emits"], config[b"vectors"], config[b"attach"], config[b"migration_label"]) == (
        b"0", b"1", b"vector", b"0",
    )  # fmt: skip


def test_a_protocol_with_a_tree_needs_one_and_an_unknown_one_is_named(toy):
    register(Traits("toytree", "helpers.toy_protocol:Toy", tree=True, emits_labels=True, attach="tree"))
    try:
        with pytest.raises(TopologyError, match="'toytree' needs serializers and a tree"):
            two_regions("toytree")
    finally:
        TRAITS.pop("toytree")
    with pytest.raises(TopologyError, match=r"unknown protocol 'nope' \(known: eventual, saturn"):
        two_regions("nope")
    with pytest.raises(ValueError, match="attach rule 'sideways' unknown"):
        Traits("bad", "x:Y", attach="sideways")  # type: ignore[arg-type]


# A protocol's name compared with a literal: `protocol == "saturn"`, `cfg.protocol == 'cure'`...
NAME_COMPARISON = re.compile(r"""protocol\b\s*(==|!=|~=|in\s*\()\s*['"(]|\(['"]protocol['"]\)\s*==""")


def test_no_code_compares_a_protocol_by_name():
    """Outside the traits table and the protocols' own modules, what differs by protocol is read
    from its traits: the services, the gears, the client and the web app."""
    found = []
    for package in ("services", "causal_client", "webapp"):
        for path in (ROOT / package).rglob("*"):
            if path.suffix not in (".py", ".lua") or "_pb2" in path.name or path.name == "traits.py":
                continue
            if path.parent.name == "protocols":
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if NAME_COMPARISON.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def test_the_name_check_finds_what_it_looks_for():
    lines = ['if t.protocol == "saturn":', "if cfg.protocol == 'cure' then", "if cfg.protocol ~= 'eventual'",
             'x = described.get("protocol") == "cure"', 'if protocol in ("gentlerain", "cure"):']  # fmt: skip
    for line in lines:
        assert NAME_COMPARISON.search(line), line
    assert not NAME_COMPARISON.search("if t.traits.tree and protocol_class(name):")
