"""Where a label sink's heartbeats go (services/labelpath/pump.py): every region must hear from
the sink's region at least every ``sink_heartbeat_s`` (proxies call a silent tree down, attaches
wait on watermarks), but a label that reaches a region is heard there as well as a heartbeat. So
a heartbeat goes only to the regions no label reached for half a period or more, and to every
region when it names none. No process is started: the sink's link is a recorder."""

from __future__ import annotations

import time

from helpers.topologies import load_topology

from services.proto import saturn_pb2
from services.saturn.label_sink import LabelSink
from services.saturn.serializer import Router

TOPOLOGY = load_topology("demo-3region-partial.toml", protocol="saturn")  # virginia, ireland, frankfurt


class Recorder:
    def __init__(self) -> None:
        self.sent: list[saturn_pb2.TreeLabel] = []

    def send(self, labels: list[saturn_pb2.TreeLabel]) -> None:
        self.sent += labels


def sink_at(region: str) -> tuple[LabelSink, Recorder]:
    sink = LabelSink(TOPOLOGY, region)
    sink.link = recorder = Recorder()  # type: ignore[assignment]
    return sink, recorder


def update(group: str, ts: int) -> saturn_pb2.TreeLabel:
    return saturn_pb2.TreeLabel(
        type=saturn_pb2.TREE_UPDATE, src="virginia/0", ts=ts, target=f"{group}/r", group=group
    )


def ago(seconds: float) -> float:
    return time.monotonic() - seconds


def test_a_fresh_sink_heartbeats_every_region_at_once():
    sink, link = sink_at("virginia")
    assert sink.heartbeat_due()
    sink.beat(10)
    assert [(b.type, b.ts, b.target) for b in link.sent] == [(saturn_pb2.TREE_HEARTBEAT, 10, "")]
    assert not sink.heartbeat_due()  # everyone heard just now


def test_labels_count_as_heard_and_heartbeats_go_only_where_none_went():
    sink, link = sink_at("virginia")
    sink.beat(1)
    sink.last_reached = {"ireland": ago(0.6), "frankfurt": ago(0.6)}
    sink.send([update("atlantic", 2)])  # virginia and ireland replicate it: ireland hears it
    assert sink.last_reached["ireland"] > ago(0.1)
    assert sink.heartbeat_due()  # frankfurt has heard nothing for 0.6 s
    sink.beat(3)
    assert link.sent[-1].type == saturn_pb2.TREE_HEARTBEAT and link.sent[-1].target == "frankfurt"
    assert not sink.heartbeat_due()


def test_regions_due_soon_come_along_and_all_of_them_means_everywhere():
    sink, link = sink_at("virginia")
    sink.last_reached = {"ireland": ago(0.3), "frankfurt": ago(0.6)}  # ireland: past half a period
    sink.beat(4)
    assert link.sent[-1].target == ""  # both: named by no one, routed everywhere
    sink.last_reached = {"ireland": ago(0.1), "frankfurt": ago(0.6)}
    sink.beat(5)
    assert link.sent[-1].target == "frankfurt"


def test_a_migration_is_heard_by_its_target_and_a_group_kept_home_by_nobody():
    sink, _ = sink_at("virginia")
    sink.last_reached = {"ireland": ago(0.6), "frankfurt": ago(0.6)}
    migration = saturn_pb2.TreeLabel(
        type=saturn_pb2.TREE_MIGRATION, src="virginia/0", ts=6, target="frankfurt"
    )
    sink.send([migration, update("us-only", 7)])  # us-only never leaves virginia
    assert sink.last_reached["frankfurt"] > ago(0.1) and sink.last_reached["ireland"] < ago(0.5)


def test_the_tree_carries_a_named_heartbeat_to_the_named_region_only():
    """virginia's sink names frankfurt: s-us passes it to s-eu, which passes it to frankfurt only."""
    sink, link = sink_at("virginia")
    sink.last_reached = {"ireland": ago(0.1), "frankfurt": ago(0.6)}
    sink.beat(8)
    batch = saturn_pb2.LabelBatch(labels=link.sent)
    at_us = Router(TOPOLOGY, "s-us").route("virginia", batch)
    assert set(at_us) == {"s-eu"}
    assert set(Router(TOPOLOGY, "s-eu").route("s-us", at_us["s-eu"])) == {"frankfurt"}
