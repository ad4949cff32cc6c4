"""Topology files: the shipped ones load, and malformed ones are refused with the field named."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from services.topology import Topology, TopologyError

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"
SHIPPED = sorted(TOPOLOGIES.glob("*.toml"))

# The paper's Table 1: one-way latencies (ms) between the seven EC2 sites.
TABLE_1 = {
    ("NV", "NC"): 37, ("NV", "O"): 49, ("NV", "I"): 41, ("NV", "F"): 45, ("NV", "T"): 73, ("NV", "S"): 115,
    ("NC", "O"): 10, ("NC", "I"): 74, ("NC", "F"): 84, ("NC", "T"): 52, ("NC", "S"): 79,
    ("O", "I"): 69, ("O", "F"): 79, ("O", "T"): 45, ("O", "S"): 81,
    ("I", "F"): 10, ("I", "T"): 107, ("I", "S"): 154,
    ("F", "T"): 118, ("F", "S"): 161,
    ("T", "S"): 52,
}  # fmt: skip

HEADER = 'name = "t"\n'
LATENCY = "[latency_ms]\nA = { B = 20 }\n"
REGIONS = '[[regions]]\nname = "a"\nsite = "A"\n\n[[regions]]\nname = "b"\nsite = "B"\n'
GROUPS = '[groups]\nall = ["*"]\n'
VALID = HEADER + LATENCY + REGIONS + GROUPS


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.toml"
    path.write_text(text)
    return path


def refused(path: Path) -> str:
    with pytest.raises(TopologyError) as info:
        Topology.load(path)
    message = str(info.value)
    assert str(path) in message  # the message says which file
    return message


# -- shipped files -------------------------------------------------------------------------------
def test_there_are_shipped_topologies():
    assert {p.name for p in SHIPPED} >= {
        "two-region.toml",
        "demo-3region.toml",
        "demo-3region-partial.toml",
        "ec2-7region.toml",
    }


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_file_loads(path):
    topology = Topology.load(path)
    assert topology.source == str(path)
    assert topology.region_names
    assert "all" in topology.group_members
    assert set(topology.group_members["all"]) == set(topology.region_names)
    for members in topology.group_members.values():
        assert members and set(members) <= set(topology.region_names)
    ports = [port for _, port in topology.all_ports()]
    assert len(ports) == len(set(ports))
    # latencies are given for every pair of sites and are symmetric
    for a, b in itertools.permutations(topology.sites, 2):
        assert topology._raw_latency(a, b) is not None, (a, b)
        assert topology.latency_ms_between(a, b) == topology.latency_ms_between(b, a) > 0


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_file_round_trips_through_the_launchers_json(path):
    topology = Topology.load(path)
    again = Topology.from_dict(topology.model_dump())
    assert again.model_dump() == topology.model_dump()
    assert again.group_members == topology.group_members


def test_seven_regions_have_the_papers_table_1_latencies():
    topology = Topology.load(TOPOLOGIES / "ec2-7region.toml")
    assert len(topology.regions) == 7
    assert sorted(topology.sites) == sorted({"NV", "NC", "O", "I", "F", "T", "S"})
    assert len(TABLE_1) == 21  # every pair once
    for (a, b), ms in TABLE_1.items():
        assert topology.latency_ms_between(a, b) == ms, (a, b)
        assert topology.latency_ms_between(b, a) == ms, (b, a)
    assert topology.latency_ms_between("NV", "NV") == 0
    assert topology.region_latency_ms("virginia", "california") == 37
    assert topology.region_latency_ms("ireland", "frankfurt") == 10
    assert topology.region_latency_ms("sydney", "frankfurt") == 161
    assert topology.region_latency_ms("tokyo", "sydney") == 52


def test_partial_demo_groups():
    topology = Topology.load(TOPOLOGIES / "demo-3region-partial.toml")
    assert topology.group_members["europe"] == ("ireland", "frankfurt")
    assert topology.group_members["atlantic"] == ("virginia", "ireland")
    assert topology.groups_at("virginia") == {"all", "atlantic", "us-only"}
    assert topology.groups_at("frankfurt") == {"all", "europe", "eu-central"}


def test_a_small_valid_file_loads(tmp_path):
    topology = Topology.load(write(tmp_path, VALID))
    assert topology.region_names == ["a", "b"]
    assert topology.latency_ms_between("B", "A") == 20


def test_saturn_timings_come_from_the_saturn_table(tmp_path):
    """One validated place for the timings that must agree (services/tuning.py); the services
    read them from the topology (the sink's heartbeat period here)."""
    from services.saturn.label_sink import LabelSink

    default = Topology.load(write(tmp_path, VALID)).saturn
    assert default.tree_silence_s >= 3 * default.sink_heartbeat_s
    table = "sink_heartbeat_s = 1.0\ntree_silence_s = 4.0\nbulk_heartbeat_s = 0.05\n"
    text = VALID + "[saturn]\n" + table
    tuned = Topology.load(write(tmp_path, text))
    assert (tuned.saturn.sink_heartbeat_s, tuned.saturn.tree_silence_s) == (1.0, 4.0)
    assert Topology.from_dict(tuned.model_dump()).saturn == tuned.saturn  # the launcher's JSON keeps it
    data = tuned.model_dump() | {"protocol": "saturn", "serializers": [{"name": "s", "site": "A"}],
                                 "tree": [{"a": "a", "b": "s"}, {"a": "b", "b": "s"}]}  # fmt: skip
    sink = LabelSink(Topology.from_dict(data), "a")
    sink.last_reached["b"] = time.monotonic() - 0.6
    assert not sink.heartbeat_due()  # 0.6 s: due only after a second here
    sink.last_reached["b"] = time.monotonic() - 1.0
    assert sink.heartbeat_due()


def test_the_strong_table_chooses_how_red_operations_are_ordered_and_clients_learn_it(tmp_path):
    assert Topology.load(write(tmp_path, VALID)).describe()["strong"] == {
        "mode": "vivace",
        "token_hold_ms": 1000.0,
    }
    tuned = Topology.load(write(tmp_path, VALID + '[strong]\nmode = "token"\ntoken_hold_ms = 250\n'))
    assert tuned.describe()["strong"] == {"mode": "token", "token_hold_ms": 250.0}
    for bad in ('mode = "paxos"', "token_hold_ms = 0", "hold = 1"):
        with pytest.raises(TopologyError):
            Topology.load(write(tmp_path, VALID + f"[strong]\n{bad}\n"))


# -- malformed files -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('colour = "red"\n' + VALID, ["colour", "unknown field"], id="unknown-top-field"),
        pytest.param(
            HEADER + LATENCY + REGIONS + "zone = 3\n" + GROUPS,
            ["regions[1].zone", "unknown field"],
            id="unknown-region-field",
        ),
        pytest.param(
            HEADER + "[latency_ms]\nA = { B = 20, X = 5 }\n" + REGIONS,
            ["latency_ms.A.X", "'X'"],
            id="unknown-site-in-latency",
        ),
        pytest.param(
            HEADER + "[latency_ms]\nA = { B = 20 }\nQ = { A = 5 }\n" + REGIONS,
            ["latency_ms.Q", "'Q'"],
            id="unknown-site-as-latency-row",
        ),
        pytest.param(
            HEADER
            + "[latency_ms]\nA = { B = 20, C = 30 }\n"
            + REGIONS
            + '\n[[regions]]\nname = "c"\nsite = "C"\n',
            ["latency_ms", "'B' and 'C'"],
            id="missing-latency",
        ),
        pytest.param(
            HEADER + "[latency_ms]\nA = { B = -1 }\n" + REGIONS,
            ["latency_ms.A.B", ">= 0"],
            id="negative-latency",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '[groups]\nall = ["*"]\neu = ["a", "zz"]\n',
            ["groups.eu", "unknown region 'zz'"],
            id="unknown-region-in-group",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + "[groups]\nnone = []\n",
            ["groups", "'none'", "no regions"],
            id="empty-group",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '\n[[regions]]\nname = "a"\nsite = "B"\n',
            ["regions", "duplicate", "'a'"],
            id="duplicate-region",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '\n[[serializers]]\nname = "s"\nsite = "A"\n'
            '\n[[tree]]\na = "a"\nb = "s"\n',
            ["tree", "3 nodes", "2 edges"],
            id="tree-too-few-edges",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '\n[[serializers]]\nname = "s"\nsite = "A"\n'
            '\n[[serializers]]\nname = "t"\nsite = "A"\n'
            '\n[[tree]]\na = "s"\nb = "t"\n\n[[tree]]\na = "t"\nb = "a"\n\n[[tree]]\na = "a"\nb = "s"\n',
            ["tree", "not connected", "'b'"],
            id="tree-with-cycle",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '\n[[serializers]]\nname = "s"\nsite = "A"\n'
            '\n[[tree]]\na = "a"\nb = "s"\n\n[[tree]]\na = "a"\nb = "b"\n',
            ["tree", "region 'a'", "leaf"],
            id="region-not-a-leaf",
        ),
        pytest.param(
            HEADER + LATENCY + REGIONS + '\n[[serializers]]\nname = "s"\nsite = "A"\n'
            '\n[[tree]]\na = "a"\nb = "s"\n\n[[tree]]\na = "nowhere"\nb = "s"\n',
            ["tree[1]", "unknown node 'nowhere'"],
            id="tree-unknown-node",
        ),
        pytest.param(
            HEADER
            + LATENCY
            + '[[regions]]\nname = "a"\nsite = "A"\nports = { frontend = 9000 }\n'
            + '\n[[regions]]\nname = "b"\nsite = "B"\nports = { metrics = 9000 }\n',
            ["port 9000", "a.frontend", "b.metrics"],
            id="port-clash",
        ),
        pytest.param(
            'name = "t"\nbase_port = 8000\n'
            + LATENCY
            + REGIONS
            + '\n[[regions]]\nname = "c"\nsite = "A"\nports = { redis = 8001 }\n',
            ["port 8001", "a.bulk", "c.redis0"],
            id="port-clash-with-derived-port",
        ),
        pytest.param(
            HEADER
            + LATENCY
            + '[[regions]]\nname = "a"\nsite = "A"\nhost = "10.0.0.1"\nports = { frontend = 9000 }\n'
            + '\n[[regions]]\nname = "b"\nsite = "B"\nhost = "10.0.0.1"\nports = { bulk = 9000 }\n',
            ["10.0.0.1:9000", "a.frontend", "b.bulk"],
            id="port-clash-on-a-shared-host",
        ),
        pytest.param(
            HEADER + LATENCY + '[[regions]]\nname = "a"\nsite = "A"\nhost = "bad host!"\n',
            ["regions[0].host"],
            id="bad-host",
        ),
        pytest.param(HEADER + 'bind = "not a host?"\n' + LATENCY + REGIONS, ["bind"], id="bad-bind"),
        pytest.param(
            'name = "t"\nprotocol = "saturn"\n' + LATENCY + REGIONS,
            ["protocol 'saturn'", "tree"],
            id="saturn-without-tree",
        ),
        pytest.param('name = "t"\nprotocol = "paxos"\n' + LATENCY + REGIONS, ["protocol"], id="bad-protocol"),
        pytest.param(
            HEADER + LATENCY + '[[regions]]\nname = "a"\nsite = "A"\nshards = "two"\n',
            ["regions[0].shards"],
            id="wrong-type",
        ),
        pytest.param(LATENCY + REGIONS, ["name", "required"], id="missing-name"),
        pytest.param(HEADER + "regions = []\n", ["regions"], id="no-regions"),
        pytest.param(
            HEADER + '[[regions]]\nname = "bad name!"\nsite = "A"\n', ["regions[0].name"], id="bad-name"
        ),
        pytest.param(
            VALID + "[saturn]\nsink_heartbeat_s = 1.0\n",
            ["saturn", "tree_silence_s (1.5) must be at least 3 sink heartbeats"],
            id="silence-under-3-heartbeats",
        ),
        pytest.param(
            VALID + "[saturn]\nheartbeat_max_age_s = 1.2\n",
            ["heartbeat_max_age_s (1.2) must stay below tree_silence_s minus one heartbeat (1)"],
            id="slack-past-the-silence",
        ),
        pytest.param(
            VALID + "[saturn]\nheartbeat_slack_s = 0.5\n", ["heartbeat_slack_s (0.5) must not"], id="slack"
        ),
        pytest.param(VALID + "[saturn]\nlink_retry_s = []\n", ["saturn.link_retry_s"], id="no-retry-delay"),
        pytest.param(VALID + "[saturn]\ntree_silence = 2\n", ["saturn.tree_silence", "unknown"], id="typo"),
        pytest.param(VALID + "[saturn]\nbulk_heartbeat_s = -1\n", ["saturn.bulk_heartbeat_s"], id="negative"),
        pytest.param(
            VALID + "[saturn]\nbusy_linger_s = 0.01\n", ["saturn.busy_linger_s", "unknown"], id="no-linger"
        ),
    ],
)
def test_malformed_file_is_refused_naming_the_field(tmp_path, text, expected):
    message = refused(write(tmp_path, text))
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_invalid_toml_text(tmp_path):
    message = refused(write(tmp_path, 'name = "unterminated\n[[regions]\n'))
    assert "not valid TOML" in message


def test_non_utf8_file(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b'\xff\xfe name = "t"\n')
    assert "not valid TOML" in refused(path)


def test_missing_file(tmp_path):
    assert "no such topology file" in refused(tmp_path / "nope.toml")


def test_a_directory_is_not_a_topology_file(tmp_path):
    assert "cannot read" in refused(tmp_path)


def test_topology_error_is_a_value_error_and_from_dict_names_the_source():
    with pytest.raises(ValueError, match=r"^mine: colour: unknown field"):
        Topology.from_dict({"name": "t", "regions": [{"name": "a", "site": "A"}], "colour": 1}, "mine")


def test_unknown_region_lookup_raises_topology_error():
    topology = Topology.load(TOPOLOGIES / "two-region.toml")
    with pytest.raises(TopologyError, match="'nowhere'"):
        topology.region("nowhere")


def test_nodes_on_their_own_hosts(tmp_path):
    """A region or serializer may name its host: peers and clients reach it there, its services
    listen there (or on ``bind``, 0.0.0.0 in a container); the same port on two hosts is fine."""
    text = (
        'name = "t"\nprotocol = "saturn"\nhost = "127.0.0.1"\n' + LATENCY
        + '[[regions]]\nname = "a"\nsite = "A"\nhost = "east.example"\nports = { frontend = 9000 }\n'
        + '\n[[regions]]\nname = "b"\nsite = "B"\nhost = "10.1.2.3"\nports = { frontend = 9000 }\n'
        + '\n[[serializers]]\nname = "s"\nsite = "A"\n'
        + '\n[[tree]]\na = "a"\nb = "s"\n\n[[tree]]\na = "b"\nb = "s"\n'
    )  # fmt: skip
    t = Topology.load(write(tmp_path, text))
    assert t.frontend_endpoint("a") == "east.example:9000" and t.frontend_endpoint("b") == "10.1.2.3:9000"
    assert t.redis_url("b").startswith("redis://10.1.2.3:") and t.web_url("a").startswith(
        "http://east.example:"
    )
    assert t.tree_endpoint("s").startswith("127.0.0.1:")  # no host of its own: the topology's
    assert t.bind_host("a") == "east.example"
    inside = Topology.from_dict({**t.model_dump(), "bind": "0.0.0.0"})
    assert inside.bind_host("a") == inside.bind_host("s") == "0.0.0.0"
    assert inside.frontend_endpoint("a") == "east.example:9000"  # peers still use the name
