"""Links with a bandwidth (services/wan/): the scheduler's order and its one capacity shared by
every connection, the relay routes a topology implies, and their validation. No process starts
here; test_relay.py runs the relays."""

from __future__ import annotations

import asyncio

import pytest
from helpers.topologies import load_topology

from causal_client.wan import Relays
from services.relay.relay import Relay
from services.topology import TopologyError
from services.wan.routes import FLOOD, flood_endpoint
from services.wan.scheduler import BULK, CRITICAL, LinkScheduler


def drain(link: LinkScheduler) -> list[tuple[str, bytes]]:
    order = []
    while (chunk := link.next_chunk()) is not None:
        order.append((chunk.cls, chunk.data))
    return order


def test_with_priority_critical_bytes_leave_before_bulk_bytes_queued_earlier():
    link = LinkScheduler(rate_mbit=8, priority=True)
    link.submit(BULK, b"b1", print)
    link.submit(BULK, b"b2", print)
    link.submit(CRITICAL, b"c1", print)
    link.submit(BULK, b"b3", print)
    link.submit(CRITICAL, b"c2", print)
    assert drain(link) == [(CRITICAL, b"c1"), (CRITICAL, b"c2"), (BULK, b"b1"), (BULK, b"b2"), (BULK, b"b3")]


def test_without_priority_bytes_leave_in_the_order_they_came():
    link = LinkScheduler(rate_mbit=8, priority=False)
    for cls, data in ((BULK, b"b1"), (CRITICAL, b"c1"), (BULK, b"b2"), (CRITICAL, b"c2")):
        link.submit(cls, data, print)
    assert [d for _, d in drain(link)] == [b"b1", b"c1", b"b2", b"c2"]


def test_a_large_write_is_cut_so_that_critical_bytes_wait_for_one_chunk_at_most():
    link = LinkScheduler(rate_mbit=8, priority=True)
    size = link.chunk_bytes
    assert size == 2000  # 2 ms of 8 Mbit/s
    link.submit(BULK, b"x" * (3 * size + 1), print)
    first = link.next_chunk()
    link.submit(CRITICAL, b"label", print)
    assert first is not None and len(first.data) == size
    assert link.next_chunk().data == b"label"  # type: ignore[union-attr]
    assert [len(d) for _, d in drain(link)] == [size, size, 1]


def test_every_connection_shares_one_capacity():
    """Chunks of two connections leave one after the other on one clock: n bytes in all take
    n / rate, whoever sent them (each alone would have taken half)."""
    link = LinkScheduler(rate_mbit=8, priority=False)  # 1,000,000 bytes/s
    clock = 100.0
    for size in (250_000, 250_000, 500_000):  # connection 1, connection 2, connection 1 again
        leaves = link.departure(size, clock, was_idle=clock == 100.0)
    assert leaves == pytest.approx(101.0)


def test_a_busy_link_that_woke_late_catches_up_and_an_idle_one_does_not_borrow():
    link = LinkScheduler(rate_mbit=8, priority=False)
    assert link.departure(100_000, 10.0, was_idle=True) == pytest.approx(10.1)
    assert link.departure(100_000, 10.5, was_idle=False) == pytest.approx(10.2)  # busy: no gap lost
    assert link.departure(100_000, 20.0, was_idle=True) == pytest.approx(20.1)  # idle: no credit


def test_the_running_scheduler_delivers_everything_critical_first_and_counts_it():
    async def run() -> tuple[list[bytes], dict[str, int]]:
        link = LinkScheduler(rate_mbit=80, priority=True)
        delivered: list[bytes] = []
        link.submit(BULK, b"a" * 10_000, delivered.append)  # both queued before the loop runs
        link.submit(CRITICAL, b"c", delivered.append)
        stop = asyncio.Event()
        task = asyncio.create_task(link.run(stop))
        while len(delivered) < 2:
            await asyncio.sleep(0.001)
        stop.set()
        link.submit(BULK, b"", delivered.append)  # wakes it to see the stop
        await asyncio.wait_for(task, 1)
        return delivered, link.sent

    delivered, sent = asyncio.run(run())
    assert delivered[:2] == [b"c", b"a" * 10_000]
    assert sent == {CRITICAL: 1, BULK: 10_000}


def test_every_connection_between_two_sites_with_a_bandwidth_has_a_relay_port():
    topology = load_topology("two-region.toml", bandwidth_mbit={"A": {"B": 10}})
    relays = topology.relays
    for store in topology.store_endpoints("b"):
        assert {relays.route("A", store, c) for c in ("data", "meta")} <= {
            r.via for r in topology.relay_routes
        }
        assert relays.route("A", store, "data") != relays.route("A", store, "meta")
        assert relays.route("B", store, "data") == store  # same site: straight
    bulk = topology.bulk_endpoint("a")
    assert relays.route("B", bulk, "ship") != bulk
    assert relays.route("B", bulk, "ship") != relays.route("B", bulk, "meta")
    ports = [r.port for r in topology.relay_routes]
    assert len(ports) == len(set(ports))
    assert flood_endpoint(topology, "A", "B") != flood_endpoint(topology, "B", "A")
    assert sum(r.cls == FLOOD for r in topology.relay_routes) == 2


def test_without_a_bandwidth_nothing_goes_through_a_relay():
    topology = load_topology("two-region.toml")
    assert topology.relay_routes == []
    store = topology.store_endpoints("b")[0]
    assert topology.relays.route("A", store, "data") == store
    with pytest.raises(KeyError):
        flood_endpoint(topology, "A", "B")


@pytest.mark.parametrize(
    "table, message",
    [
        ({"A": {"B": 0}}, "must be > 0"),
        ({"A": {"Z": 10}}, "not a pair of two sites"),
        ({"A": {"A": 10}}, "not a pair of two sites"),
    ],
)
def test_a_bad_bandwidth_table_is_refused_with_the_field(table, message):
    with pytest.raises((TopologyError, ValueError), match=message):
        load_topology("two-region.toml", bandwidth_mbit=table)


def test_an_unknown_traffic_class_is_refused():
    with pytest.raises(ValueError, match="traffic class"):
        Relays().route("A", "127.0.0.1:1", "urgent")


def test_a_relay_refuses_to_listen_beyond_loopback():
    """A relay checks no credentials (anyone could flood it): it is for one machine only."""
    topology = load_topology("two-region.toml", bandwidth_mbit={"A": {"B": 10}}, host="10.0.0.5")
    with pytest.raises(SystemExit, match="loopback only"):
        Relay(topology, "A-B")
