"""Supervised processes: whatever dies comes back without a person (with backoff), restarts show
in the state file, and a process that keeps dying young is given up with a clear message."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.waiting import eventually, unique

from services.launcher import supervisor as supervision
from services.launcher.cluster import STATE_FILE, Cluster
from services.pids import pid_alive

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

VICTIMS = [  # b's and c's bulk senders run their regions' label sinks (plan.label_sink_process)
    "a.frontend0", "b.bulk-sender", "c.bulk-sender", "c.bulk-receiver", "serializer.s-b", "a.redis0",
]  # fmt: skip


def state(cluster: Cluster) -> dict:
    return json.loads((cluster.run_dir / STATE_FILE).read_text())["processes"]


def test_processes_that_die_come_back_and_the_store_works_on(launch, client_for):
    """SIGKILL from outside (a crash, not Cluster.kill): each victim is back, healthy, with one
    restart in the state file; afterwards writes still replicate in causal order everywhere."""
    cluster: Cluster = launch("causality-3region.toml", protocol="saturn")
    client = client_for(cluster)
    for name in VICTIMS:
        dead = cluster.processes[name].popen.pid
        os.kill(dead, signal.SIGKILL)

        def back(name=name, dead=dead) -> bool:
            running = cluster.processes[name]
            pid = running.popen.pid
            return pid != dead and pid_alive(pid) and cluster.is_healthy(running.spec)

        eventually(back, timeout=20)
        eventually(lambda name=name: state(cluster)[name]["restarts"] == 1, timeout=5)
        assert state(cluster)[name]["state"] == "running"
    row = unique("after")
    client.session("a").write("all", row, {"v": "1"})
    for region in ("b", "c"):
        eventually(lambda region=region: client.session(region).read("all", row).text("v") == "1", timeout=20)


def checks_from_now(cluster: Cluster) -> list[float]:
    """When the cluster's supervisor checks its processes from now on (its own ``check``,
    wrapped to note the time each begins)."""
    supervisor = cluster.supervisor
    assert supervisor is not None
    began: list[float] = []
    check = supervisor.check

    def noted() -> None:
        began.append(time.monotonic())
        check()

    supervisor.check = noted  # type: ignore[method-assign]
    return began


def test_a_process_stopped_on_purpose_stays_down_until_restarted(launch):
    cluster: Cluster = launch("two-region.toml")
    cluster.kill("b.frontend0")
    checks = checks_from_now(cluster)
    # Supervisor checks over 1.5 s: long enough for one that took the kill for a death (at its
    # first check) to restart it (the first delay, 0.5 s, at a later check).
    eventually(lambda: checks and checks[-1] - checks[0] >= 1.5, timeout=10, what="supervisor checks")
    assert cluster.processes["b.frontend0"].popen.poll() is not None
    assert state(cluster)["b.frontend0"]["state"] == "stopped"
    cluster.restart("b.frontend0")
    after = state(cluster)["b.frontend0"]
    assert (after["state"], after["restarts"]) == ("running", 0)  # a restart on purpose is no crash


class Flaky:
    """Real processes that die at once (exit 3), restarted through the supervisor."""

    def __init__(self) -> None:
        self.popen = self.spawn()
        self.restarted_at: list[float] = []
        self.changes = 0

    @staticmethod
    def spawn() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    def restart(self, name: str) -> None:
        self.restarted_at.append(time.monotonic())
        self.popen = self.spawn()

    def changed(self) -> None:
        self.changes += 1


def test_a_process_that_keeps_dying_young_is_given_up_after_backoff(monkeypatch, caplog):
    monkeypatch.setattr(supervision, "FIRST_DELAY_S", 0.05)
    monkeypatch.setattr(supervision, "MAX_DELAY_S", 0.2)
    flaky = Flaky()
    watcher = supervision.Supervisor(
        lambda name: flaky.popen.poll(), lambda: ["flaky"], flaky.restart, flaky.changed, poll_s=0.01
    )
    with caplog.at_level(logging.WARNING, logger="launcher.supervisor"):
        watcher.start()
        try:
            eventually(lambda: watcher.watches["flaky"].gave_up, timeout=10)
        finally:
            watcher.stop()
    watch = watcher.watches["flaky"]
    assert watch.restarts == supervision.GIVE_UP_AFTER - 1 and watch.state == "gave-up"
    assert watch.last_exit == 3
    gaps = [b - a for a, b in zip(flaky.restarted_at, flaky.restarted_at[1:], strict=False)]
    assert gaps[0] >= 0.1 - 0.02 and gaps[-1] >= 0.2 - 0.02  # the delay doubled, up to its cap
    assert "keeps dying" in caplog.text and "last exit code 3" in caplog.text
    time.sleep(0.3)  # a window (a fixed time) in which it must not be tried again
    assert len(flaky.restarted_at) == supervision.GIVE_UP_AFTER - 1  # given up: no more tries


def test_a_process_that_lived_long_starts_over_from_the_first_delay(monkeypatch):
    monkeypatch.setattr(supervision, "LIVED_S", 0.0)  # every death counts as after a long life
    flaky = Flaky()
    watcher = supervision.Supervisor(
        lambda name: flaky.popen.poll(), lambda: ["flaky"], flaky.restart, flaky.changed, poll_s=0.01
    )
    monkeypatch.setattr(supervision, "FIRST_DELAY_S", 0.01)
    watcher.start()
    try:
        eventually(lambda: len(flaky.restarted_at) >= supervision.GIVE_UP_AFTER + 2, timeout=10)
    finally:
        watcher.stop()
    assert not watcher.watches["flaky"].gave_up
