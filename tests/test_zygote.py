"""The launcher's zygote (services/launcher/zygote.py): every Python service forked from one
process that imported their libraries once, each still its own process (its pid, command line,
directory, environment and log), its exit reported to the launcher, and none outliving it."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import pytest
from helpers.waiting import eventually, unique

from services.launcher import zygote
from services.launcher.cluster import Cluster
from services.pids import pid_alive

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def command_of(pid: int) -> list[str]:
    """What ps shows: an exec'd process's arguments, or a forked one's title (one string)."""
    shown = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode()
    return shown.split("\0") if "\0" in shown else shlex.split(shown)


def services_of(cluster: Cluster) -> dict[str, int]:
    return {name: r.popen.pid for name, r in cluster.processes.items() if r.spec.kind != "redis"}


def test_each_service_is_forked_by_one_zygote_as_a_process_of_its_own(launch):
    """One parent for every service, none for the stores; each shows its own command line, works
    in the run directory, writes its log, and has its own environment (not the zygote's): its
    region's metrics directory, where only that region's processes write."""
    cluster: Cluster = launch("two-region.toml")
    services = services_of(cluster)
    parents = {parent_of(pid) for pid in services.values()}
    assert len(parents) == 1 and parents != {os.getpid()}
    (the_zygote,) = parents
    assert b"services.launcher.zygote" in Path(f"/proc/{the_zygote}/cmdline").read_bytes()
    stores = [r.popen.pid for r in cluster.processes.values() if r.spec.kind == "redis"]
    assert stores and all(parent_of(pid) == os.getpid() for pid in stores)  # not Python: started as before
    for name, pid in services.items():
        assert command_of(pid) == cluster.specs[name].argv  # ps shows the service
        assert Path(os.readlink(f"/proc/{pid}/cwd")) == cluster.run_dir
        log = cluster.processes[name].log_path  # (a worker with no port is started, not yet heard)
        eventually(lambda log=log: log.stat().st_size > 0, timeout=10, what=f"{name}'s first log line")
    for region in cluster.topology.region_names:  # its environment: each region's metrics apart

        def writers(region: str = region) -> set[int]:
            return {int(f.stem.rsplit("_", 1)[1]) for f in cluster.metrics_dir(region).glob("*_*.db")}

        mine = {pid for name, pid in services.items() if cluster.specs[name].region == region}
        eventually(writers, timeout=10, what=f"a metrics file at {region}")
        assert writers() <= mine, (region, writers(), mine)


def test_a_services_exit_status_reaches_the_launcher(launch):
    """SIGKILL shows as -9, as subprocess.Popen says it; a service asked to stop exits cleanly."""
    cluster: Cluster = launch("two-region.toml")
    cluster.kill("a.bulk-sender")
    assert cluster.processes["a.bulk-sender"].popen.returncode == -signal.SIGKILL
    cluster.kill("b.bulk-receiver", signal.SIGTERM)
    assert cluster.processes["b.bulk-receiver"].popen.returncode == 0
    cluster.restart("a.bulk-sender")
    cluster.restart("b.bulk-receiver")


def test_the_zygotes_death_takes_its_services_and_they_come_back_from_a_new_one(launch, client_for):
    """A crash of the zygote: its services end with it (no orphan serves on), the supervisor
    starts them again from a new zygote, and the store replicates as before."""
    cluster: Cluster = launch("two-region.toml")
    before = services_of(cluster)
    (old,) = {parent_of(pid) for pid in before.values()}
    os.kill(old, signal.SIGKILL)
    eventually(lambda: not any(pid_alive(pid) for pid in before.values()), timeout=15)

    def all_back() -> bool:
        now = services_of(cluster)
        return all(
            now[n] != before[n] and pid_alive(now[n]) and cluster.is_healthy(cluster.specs[n]) for n in now
        )

    eventually(all_back, timeout=30)
    parents = {parent_of(pid) for pid in services_of(cluster).values()}
    assert len(parents) == 1 and parents != {old}
    client = client_for(cluster)
    row = unique("after-zygote")
    client.session("a").write("all", row, {"v": "1"})
    eventually(lambda: client.session("b").read("all", row).text("v") == "1", timeout=20)


def test_without_the_zygote_each_service_is_an_interpreter_of_its_own(launch, monkeypatch):
    """SATURN_ZYGOTE=0: the services are started as before, each through orphan_guard's exec."""
    monkeypatch.setenv(zygote.ENV, "0")
    cluster: Cluster = launch("two-region.toml")
    for name, pid in services_of(cluster).items():
        assert parent_of(pid) == os.getpid(), name
        assert command_of(pid) == cluster.specs[name].argv
