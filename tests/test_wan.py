"""WAN emulation: latency per link, FIFO under jitter, and its effect end to end."""

import asyncio
import time

import pytest
from helpers.clusters import metric_sum
from helpers.waiting import eventually, unique

from causal_client.wan import DelayLine, Link

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_delay_line_holds_each_item_for_the_latency_and_keeps_order():
    async def run() -> list[tuple[int, float]]:
        line: DelayLine[int] = DelayLine(Link(latency_ms=30, jitter_ms=20))
        sent = {}
        for i in range(50):
            sent[i] = time.monotonic()
            line.put(i)
            await asyncio.sleep(0.001)
        out = []
        for _ in range(50):
            item = await line.get()
            out.append((item, time.monotonic() - sent[item]))
        return out

    out = asyncio.run(run())
    assert [item for item, _ in out] == list(range(50)), "jitter must not reorder a link"
    assert min(delay for _, delay in out) >= 0.030
    # jitter bound plus slack: a busy machine (the suite two files at a time) delays a wake-up
    assert max(delay for _, delay in out) < 0.030 + 0.020 + 0.200


def test_items_put_back_leave_first_and_at_once():
    """A tree link's stream that ended hands back what it took (services/labelpath/links.py)."""

    async def run() -> tuple[list[int], float]:
        line: DelayLine[int] = DelayLine(Link(latency_ms=50))
        line.put(3)
        started = time.monotonic()
        line.put_back([1, 2])
        return [await line.get(), await line.get(), await line.get()], time.monotonic() - started

    order, waited = asyncio.run(run())
    assert order == [1, 2, 3]
    assert waited >= 0.05  # 3 still waited for its latency


def test_slack_items_wait_for_company_and_leave_with_it_in_order():
    async def run() -> tuple[list[str], float, list[str], float]:
        line: DelayLine[str] = DelayLine(Link(latency_ms=20))
        started = time.monotonic()
        line.put("heartbeat a", slack=0.2)
        await asyncio.sleep(0.05)  # a's latency has passed; it waits for company
        line.put("heartbeat b", slack=0.2)
        first = await line.get_due()  # nothing else came: both leave at a's deadline, together
        first_at = time.monotonic() - started
        line.put("heartbeat c", slack=30.0)
        line.put("label", slack=0.0)  # due in 20 ms: takes the waiting heartbeat along, in order
        second_started = time.monotonic()
        second = await line.get_due()
        return first, first_at, second, time.monotonic() - second_started

    first, first_at, second, second_after = asyncio.run(run())
    assert first == ["heartbeat a", "heartbeat b"] and first_at >= 0.02 + 0.2
    assert second == ["heartbeat c", "label"]
    assert 0.02 <= second_after < 10, "a real item is never held for a slack item's deadline"


def test_only_fresh_heartbeat_batches_get_slack():
    from services.labelpath.links import heartbeat_slack
    from services.proto import saturn_pb2
    from services.tuning import SaturnTuning

    tuning = SaturnTuning()

    link = Link(latency_ms=10)
    now_us = int(time.time() * 1e6)
    heartbeat = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_HEARTBEAT, src="a/sink", ts=now_us)
    update = saturn_pb2.TreeLabel(type=saturn_pb2.TREE_UPDATE, src="a/0", ts=now_us, group="g")
    old = saturn_pb2.TreeLabel(
        type=saturn_pb2.TREE_HEARTBEAT, src="b/sink", ts=now_us - int(tuning.heartbeat_max_age_s * 1e6)
    )
    assert heartbeat_slack([heartbeat], link, tuning) == tuning.heartbeat_slack_s
    assert heartbeat_slack([heartbeat, update], link, tuning) == 0.0
    assert heartbeat_slack([heartbeat, old], link, tuning) == 0.0  # the oldest decides


def test_zero_latency_link_adds_nothing():
    link = Link(0)
    assert link.is_instant
    started = time.monotonic()
    for _ in range(1000):
        link.sleep_one_way()
    assert time.monotonic() - started < 0.05


def test_synchronous_call_pays_one_latency_per_leg():
    link = Link(latency_ms=25)
    started = time.monotonic()
    link.sleep_one_way()
    assert 0.025 <= time.monotonic() - started < 0.1


def _visibility(cluster, region: str, origin: str) -> tuple[float, float]:
    labels = {"region": region, "origin": origin}
    return (
        metric_sum(cluster, region, "causal_visibility_seconds_sum", **labels),
        metric_sum(cluster, region, "causal_visibility_seconds_count", **labels),
    )


def test_remote_updates_take_the_configured_latency(two_regions, client_for):
    """a and b are 20 ms apart: visibility at b of a's writes is at least that, and not much more."""
    client = client_for(two_regions)
    writer, reader = client.session("a"), client.session("b")
    before_sum, before_count = _visibility(two_regions, "b", "a")
    row = unique("wan")
    for i in range(20):
        writer.write("all", row, {f"c{i}": "x"})
        time.sleep(0.005)  # pacing (a fixed time)
    eventually(lambda: len(reader.read("all", row)) == 20)
    after_sum, after_count = eventually(
        lambda: (v := _visibility(two_regions, "b", "a"))[1] >= before_count + 20 and v
    )
    mean_ms = (after_sum - before_sum) / (after_count - before_count) * 1000
    assert mean_ms >= 20, f"mean visibility {mean_ms:.1f} ms: faster than the 20 ms link"
    # An upper bound only against gross errors (e.g. latency applied twice per hop, or seconds):
    # on a loaded 2-core CI machine the processes wait for CPU too.
    assert mean_ms < 20 + 400, f"mean visibility {mean_ms:.1f} ms on a 20 ms link"


def test_client_at_another_site_pays_the_round_trip(two_regions, client_for):
    near = client_for(two_regions, site="A").session("a")
    far = client_for(two_regions, site="B").session("a")
    row = unique("site")

    def timed(session) -> float:
        started = time.monotonic()
        session.read("all", row)
        return time.monotonic() - started

    near_s = min(timed(near) for _ in range(5))
    far_s = min(timed(far) for _ in range(5))
    assert far_s >= 0.040  # 20 ms each way
    assert near_s < far_s - 0.030


# -- injected faults (a nemesis writes the control file; every process reads it) ------------------
def write_control(path, **faults) -> None:
    import json
    import os

    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, path)


def test_a_partition_holds_messages_until_it_ends_then_lets_them_through_in_order(tmp_path, monkeypatch):
    from causal_client import wan

    control = tmp_path / "wan.json"
    monkeypatch.setenv(wan.CONTROL_ENV, str(control))
    now = time.time()
    write_control(control, partitions=[{"sites": ["B", "A"], "from": now - 1, "until": now + 0.3}])

    async def run() -> tuple[list[int], float, float]:
        cut: DelayLine[int] = DelayLine(Link(10, sites=("A", "B")))
        other: DelayLine[int] = DelayLine(Link(10, sites=("A", "C")))
        began = time.monotonic()
        for i in range(5):
            cut.put(i)
        other.put(99)
        await other.get()
        other_took = time.monotonic() - began
        got = [await cut.get() for _ in range(5)]
        return got, time.monotonic() - began, other_took

    got, took, other_took = asyncio.run(run())
    assert got == list(range(5)) and 0.28 <= took < 0.6  # held to the end, then all, in order
    assert other_took < 0.1  # another pair of sites is not partitioned


def test_a_latency_spike_adds_to_the_link_while_it_lasts(tmp_path, monkeypatch):
    from causal_client import wan

    control = tmp_path / "wan.json"
    monkeypatch.setenv(wan.CONTROL_ENV, str(control))
    now = time.time()
    spike = {"sites": ["A", "B"], "extra_ms": 150, "from": now - 1, "until": now + 60}
    write_control(control, spikes=[spike])
    link = Link(10, sites=("B", "A"))
    started = time.monotonic()
    link.sleep_one_way()
    assert 0.16 <= time.monotonic() - started < 0.4
    write_control(control, spikes=[spike | {"until": now - 0.5}])
    time.sleep(wan.CONTROL_REREAD_S * 2)  # a fixed time: the file is looked at again after this
    started = time.monotonic()
    link.sleep_one_way()
    assert time.monotonic() - started < 0.1  # over: the file was read again
