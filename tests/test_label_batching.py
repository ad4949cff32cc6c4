"""When the label sink batches labels (services/saturn/label_sink.py): by label rate, and longer
while the machine's CPUs are saturated, as Linux's pressure stall information (PSI) tells."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from helpers.topologies import load_topology

from causal_client.label import Label
from services import pressure
from services.pressure import CpuPressure, some_total_us
from services.region.store import RegionStore
from services.saturn import label_sink
from services.saturn.label_sink import LabelSink, MigrationWaker, RateMeter
from services.topology import Topology

PSI = "some avg10=1.00 avg60=2.00 avg300=3.00 total={}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n"


def test_psi_total_is_read_from_the_some_line():
    assert some_total_us(PSI.format(123456)) == 123456
    assert some_total_us("full avg10=0.00 total=5\n") is None
    assert some_total_us("some avg10=1.0 total=abc\n") is None
    assert some_total_us("") is None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(pressure.time, "monotonic", fake)
    return fake


def test_saturated_when_tasks_waited_a_fifth_of_the_last_second(tmp_path: Path, clock: Clock):
    psi = tmp_path / "cpu"
    psi.write_text(PSI.format(0))
    meter = CpuPressure(psi)
    assert not meter.saturated()  # a first reading has no window yet
    clock.now += 1.0
    psi.write_text(PSI.format(150_000))  # 15 % of the second stalled
    assert not meter.saturated()
    clock.now += 0.5
    psi.write_text(PSI.format(10_000_000))
    assert not meter.saturated(), "read at most once a second: the answer stands until then"
    clock.now += 0.5
    assert meter.saturated()  # far above a fifth of the window
    clock.now += 1.0
    psi.write_text(PSI.format(10_100_000))  # 10 %
    assert not meter.saturated()


def test_without_psi_the_machine_never_counts_as_saturated(tmp_path: Path, clock: Clock):
    meter = CpuPressure(tmp_path / "missing")
    for _ in range(3):
        clock.now += 1.0
        assert not meter.saturated()


def test_the_rate_meter_counts_the_last_tenth_of_a_second(monkeypatch):
    now = [50.0]
    monkeypatch.setattr(label_sink.time, "monotonic", lambda: now[0])
    rate = RateMeter(window_s=0.1)
    assert rate.add(10) == pytest.approx(100.0)
    now[0] += 0.05
    assert rate.add(10) == pytest.approx(200.0)
    now[0] += 0.08  # the first 10 are out of the window
    assert rate.add(0) == pytest.approx(100.0)


class Pressure:
    def __init__(self, saturated: bool) -> None:
        self.value = saturated

    def saturated(self) -> bool:
        return self.value


def test_the_sink_lingers_only_above_the_busy_rate_and_longer_when_saturated():
    topology = Topology.load(Path(__file__).parents[1] / "topologies" / "demo-3region.toml")
    sink = LabelSink(topology, "virginia")
    tuning = topology.saturn
    # in the meter's 0.1 s window: half the busy rate, and twice it
    slow, fast = int(tuning.busy_rate * 0.1 * 0.5), int(tuning.busy_rate * 0.1 * 2)
    sink.pressure = Pressure(saturated=True)
    assert sink.linger_s(slow) == 0.0, "below the busy rate labels go as they come, even saturated"
    time.sleep(0.11)
    assert sink.linger_s(fast) == tuning.saturated_linger_s
    sink.pressure = Pressure(saturated=False)
    assert sink.linger_s(0) == tuning.busy_linger_s  # the fast ones are still in the window
    time.sleep(0.11)
    assert sink.linger_s(0) == 0.0, "nothing flowing: nothing to wait for"
    assert tuning.saturated_linger_s > tuning.busy_linger_s > 0


@pytest.mark.cluster
def test_a_migration_label_cuts_the_linger_short(redis_url: str):
    """migrate.lua publishes; a lingering sink wakes at once (a client waits for that label)."""

    async def scenario() -> tuple[float, float]:
        store = RegionStore(load_topology("demo-3region.toml"), "virginia", urls=[redis_url])
        await store.install()
        shard = store.shards[0]
        waker = MigrationWaker(shard)
        stop = asyncio.Event()
        listening = asyncio.create_task(waker.run(stop))
        await asyncio.sleep(0.2)  # subscribed
        waker.before_read()
        started = time.monotonic()
        await waker.linger(0.3)  # nothing written: the whole linger
        idle = time.monotonic() - started
        waker.before_read()
        started = time.monotonic()

        async def migrate_soon() -> None:
            await asyncio.sleep(0.05)
            await store.migrate(Label.zero(), "ireland")  # as a client's migration does

        migrating = asyncio.create_task(migrate_soon())
        await waker.linger(5.0)
        await migrating
        woken = time.monotonic() - started
        stop.set()
        await listening
        await shard.close()
        return idle, woken

    idle, woken = asyncio.run(scenario())
    assert idle >= 0.29
    assert woken < 1.0, f"the migration label did not wake the sink ({woken:.2f} s)"
