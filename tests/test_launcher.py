"""The launcher: starts a topology, reports it, stops it, and never leaves a process behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from helpers.deadlines import Deadline, scaled
from helpers.topologies import ROOT, TOPOLOGIES, free_base_port, load_topology
from helpers.waiting import eventually

from causal_client import CausalClient
from services.launcher.cluster import STATE_FILE, Cluster, read_state

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

TWO_REGION = TOPOLOGIES / "two-region.toml"
EXPECTED = {
    "a.redis0", "b.redis0", "a.bulk-receiver", "b.bulk-receiver",
    "a.frontend0", "b.frontend0", "a.bulk-sender", "b.bulk-sender",
}  # fmt: skip


# -- processes ---------------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from the state on (field 3), or None if there is no such pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def snapshot(roots: Iterable[int]) -> dict[int, str]:
    """The given processes and all their descendants, as pid -> start time (against pid reuse)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            parents[int(entry)] = int(fields[1])
    tree, frontier = set(), set(roots)
    while frontier:
        tree |= frontier
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - tree
    return {pid: fields[19] for pid in tree if (fields := _stat(pid))}


def alive(processes: dict[int, str]) -> list[int]:
    """Those still running: same pid and start time, and not a zombie."""
    return [
        pid
        for pid, started in processes.items()
        if (fields := _stat(pid)) and fields[19] == started and fields[0] != "Z"
    ]


def mentioning(run_dir: Path) -> list[int]:
    """Live processes working in ``run_dir`` (the launcher starts every child there, and Redis
    moves to its data dir inside) or naming it: catches a child spawned after a pid snapshot."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = _stat(int(entry))
        inside = Path(cwd).is_relative_to(run_dir) or str(run_dir).encode() in argv
        if fields and fields[0] != "Z" and inside:
            found.append(int(entry))
    return found


def listening(host: str, ports: Iterable[int]) -> list[int]:
    busy = []
    for port in ports:
        with socket.socket() as sock:
            if sock.connect_ex((host, port)) == 0:
                busy.append(port)
    return busy


# -- the command line --------------------------------------------------------------------------
def cli(run_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "services.launcher", "--run-dir", str(run_dir), *args]


class Up:
    """`python -m services.launcher up ...` as a subprocess, its output collected by a thread."""

    def __init__(self, run_dir: Path, topology: Path, base_port: int):
        self.run_dir = run_dir
        self.popen = subprocess.Popen(
            cli(run_dir, "up", str(topology), "--base-port", str(base_port)),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = Deadline(timeout, "`up` ready")
        while "press Ctrl-C" not in self.output:
            if self.popen.poll() is not None:
                self._reader.join(scaled(5))
                pytest.fail(f"`up` exited with {self.popen.returncode}:\n{self.output}")
            if deadline.expired():
                raise deadline.fail(f"\n{self.output}")
            time.sleep(0.05)
        deadline.met()

    def wait(self, timeout: float = 30.0) -> int:
        """The launcher's exit code, once it exits within ``timeout`` (the reference machine's)."""
        code = self.popen.wait(scaled(timeout))
        self._reader.join(scaled(5))
        return code

    def cleanup(self) -> None:
        """Whatever a failed test left: stop the launcher, then any child still there."""
        state = read_state(self.run_dir)
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(scaled(20))
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        for proc in (state or {}).get("processes", {}).values():
            if alive(snapshot([proc["pid"]])):
                os.kill(proc["pid"], signal.SIGKILL)


@pytest.fixture
def start_up(tmp_path: Path) -> Iterator:
    started: list[Up] = []

    def start(topology: Path = TWO_REGION) -> tuple[Up, int]:
        base = free_base_port()
        up = Up(tmp_path / f"run{len(started)}", topology, base)
        started.append(up)
        return up, base

    yield start
    for up in started:
        up.cleanup()


def running_processes(up: Up) -> dict[int, str]:
    """Every process of the topology `up` runs (from its state file), with their descendants."""
    state = read_state(up.run_dir)
    assert state, f"no state file in {up.run_dir}"
    assert state["launcher_pid"] == up.popen.pid
    assert set(state["processes"]) == EXPECTED
    tree = snapshot(proc["pid"] for proc in state["processes"].values())
    assert len(tree) >= len(EXPECTED)
    assert sorted(alive(tree)) == sorted(tree), "a process died right after start"
    return tree


def orphans_gone(tree: dict[int, str], run_dir: Path, timeout: float = 10.0) -> None:
    """Once the launcher is gone, every process it started must die within a few seconds."""
    try:
        eventually(lambda: not alive(tree) and not mentioning(run_dir.resolve()), timeout, 0.1)
    except AssertionError:
        pytest.fail(f"orphans {scaled(timeout):.0f} s after the launcher died: {alive(tree)}, "
                    f"{mentioning(run_dir.resolve())}")  # fmt: skip


# -- tests -------------------------------------------------------------------------------------
def test_stop_leaves_no_process_behind(launch):
    cluster: Cluster = launch("two-region.toml")
    assert set(cluster.processes) == EXPECTED
    tree = snapshot(r.popen.pid for r in cluster.processes.values())
    assert sorted(alive(tree)) == sorted(tree) and len(tree) >= len(EXPECTED)
    ports = [port for _, port in cluster.topology.all_ports()]
    assert listening(cluster.topology.host, ports), "nothing listens on the topology's ports"
    assert (cluster.run_dir / STATE_FILE).exists()
    assert sorted(mentioning(cluster.run_dir)) == sorted(r.popen.pid for r in cluster.processes.values())

    cluster.stop()
    assert alive(tree) == [], "processes left behind by stop()"
    assert mentioning(cluster.run_dir) == []
    assert listening(cluster.topology.host, ports) == []
    assert not (cluster.run_dir / STATE_FILE).exists()


def test_cli_up_status_and_ctrl_c(start_up):
    up, base = start_up()
    up.wait_ready()
    topology = load_topology("two-region.toml", base_port=base)
    out = up.output
    assert f"all {len(EXPECTED)} processes healthy" in out
    for region in ("a", "b"):
        assert f"{region} gateway (gRPC)" in out and topology.frontend_endpoint(region) in out
        assert f"{region} store (clients)" in out and topology.client_address(region) in out
        assert f"http://{topology.host}:{topology.metrics_port(region)}/metrics" in out
    tree = running_processes(up)
    with CausalClient.connect(topology.client_address("b")) as client:  # the endpoint printed serves
        assert set(client.regions) == {"a", "b"}

    status = subprocess.run(
        cli(up.run_dir, "status"), cwd=ROOT, capture_output=True, text=True, timeout=scaled(60)
    )
    assert status.returncode == 0, status.stdout + status.stderr
    report = {line.split()[0]: line.split()[-1] for line in status.stdout.splitlines()[1:]}
    assert report == {name: "running" if name.endswith("sender") else "healthy" for name in EXPECTED}

    up.popen.send_signal(signal.SIGINT)
    assert up.wait(30) == 0, up.output
    assert "stopped; no process left behind" in up.output
    assert alive(tree) == [], f"left behind after Ctrl-C: {alive(tree)}"
    assert mentioning(up.run_dir.resolve()) == []
    assert listening(topology.host, [port for _, port in topology.all_ports()]) == []
    assert not (up.run_dir / STATE_FILE).exists()

    status = subprocess.run(
        cli(up.run_dir, "status"), cwd=ROOT, capture_output=True, text=True, timeout=scaled(60)
    )
    assert status.returncode != 0
    assert "nothing running" in status.stdout


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('site = "B"', 'site = "B"\nshard = 2', "regions[1].shard: unknown field"),
        ('site = "B"', 'site = "B"\nshards = 0', "regions[1].shards"),
        ('only-b = ["b"]', 'only-b = ["c"]', "groups.only-b: unknown region 'c'"),
        ("A = { B = 20 }", "A = { B = -5 }", "latency_ms.A.B"),
        ("[groups]", "[groups", "not valid TOML"),
    ],
)
def test_malformed_topology_is_rejected(tmp_path, old, new, expected):
    text = TWO_REGION.read_text()
    assert old in text
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(old, new, 1))
    run_dir = tmp_path / "run"
    result = subprocess.run(
        cli(run_dir, "up", str(bad), "--base-port", str(free_base_port())),
        cwd=ROOT, capture_output=True, text=True, timeout=scaled(60),
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert str(bad) in result.stderr and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert read_state(run_dir) is None


def test_port_in_use_is_a_clear_error(tmp_path):
    base = free_base_port()
    topology = load_topology("two-region.toml", base_port=base)
    taken = topology.redis_port("b")
    run_dir = tmp_path / "run"
    with socket.socket() as blocker:
        blocker.bind((topology.host, taken))
        blocker.listen()
        result = subprocess.run(
            cli(run_dir, "up", str(TWO_REGION), "--base-port", str(base)),
            cwd=ROOT, capture_output=True, text=True, timeout=scaled(60),
        )  # fmt: skip
        others = [port for _, port in topology.all_ports() if port != taken]
        assert listening(topology.host, others) == [], "started something despite the port clash"
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert f"port {taken} (b.redis0) is already in use" in result.stderr
    assert "Traceback" not in result.stderr
    assert read_state(run_dir) is None


def test_children_die_with_a_killed_launcher(start_up):
    up, base = start_up()
    up.wait_ready()
    tree = running_processes(up)
    topology = load_topology("two-region.toml", base_port=base)

    os.kill(up.popen.pid, signal.SIGKILL)  # no chance to stop anything itself
    assert up.wait(10) == -signal.SIGKILL
    orphans_gone(tree, up.run_dir)
    assert listening(topology.host, [port for _, port in topology.all_ports()]) == []


def test_children_die_with_a_launcher_killed_while_starting(start_up):
    up, _ = start_up()
    logs = up.run_dir / "logs"
    # Stores are up and the services are being spawned, but not all are healthy yet.
    eventually(lambda: (logs / "a.bulk-receiver.log").exists(), timeout=30)
    tree = snapshot([up.popen.pid])
    os.kill(up.popen.pid, signal.SIGKILL)
    assert up.wait(10) == -signal.SIGKILL
    assert "healthy" not in up.output, "too late: the launcher had finished starting"
    assert len(tree) > 1, "no child started yet"
    del tree[up.popen.pid]
    orphans_gone(tree, up.run_dir)
    assert read_state(up.run_dir) is None


def test_metrics_survive_a_process_killed_while_creating_its_file(launch):
    cluster: Cluster = launch("two-region.toml")
    url = f"http://{cluster.topology.host}:{cluster.topology.metrics_port('b')}/metrics"

    def scrape() -> int:
        try:
            return urllib.request.urlopen(url, timeout=scaled(5)).status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert scrape() == 200
    dead = cluster.processes["b.bulk-receiver"].popen.pid
    cluster.kill("b.bulk-receiver")
    # What a SIGKILL between creating a metrics file and sizing it leaves (seen in crash tests);
    # prometheus_client's own collector fails every scrape on it.
    (cluster.metrics_dir("b") / f"histogram_{dead}.db").write_bytes(b"")
    assert scrape() == 200
    cluster.restart("b.bulk-receiver")
    assert scrape() == 200


def test_gauges_of_killed_processes_disappear(launch):
    """`causal_proxy_tree_mode` is one per region: after a SIGKILL and a restart of the process
    that serves it, the region shows the new process's value only (not 2, the dead one's too);
    killed and not restarted, it shows none."""
    from helpers.clusters import metric_samples

    cluster: Cluster = launch("two-region.toml", protocol="saturn")

    def tree_mode() -> dict[int, float]:
        samples = metric_samples(cluster, "b")
        return {int(s.labels["pid"]): s.value for s in samples if s.name == "causal_proxy_tree_mode"}

    def receiver() -> int:
        return cluster.processes["b.bulk-receiver"].popen.pid

    assert list(tree_mode().values()) == [1.0]
    for _ in range(2):
        cluster.kill("b.bulk-receiver")
        cluster.restart("b.bulk-receiver")
        eventually(lambda: tree_mode() == {receiver(): 1.0}, timeout=15)
    cluster.kill("b.bulk-receiver")
    assert tree_mode() == {}


def test_a_process_restarted_from_a_thread_outlives_the_thread(launch):
    """The kernel's parent-death signal follows the thread that forked a child: a process that
    a worker thread restarted (a supervisor, a test harness) must not die when that thread ends."""
    cluster: Cluster = launch("two-region.toml")
    worker = threading.Thread(target=cluster.restart, args=("b.frontend0",))
    worker.start()
    worker.join(scaled(30))
    restarted = cluster.processes["b.frontend0"]
    time.sleep(1.5)  # a window: a SIGTERM at the thread's exit takes effect within the grace period
    assert restarted.popen.poll() is None, f"exited with {restarted.popen.returncode}"
    assert cluster.is_healthy(restarted.spec)
    with CausalClient.connect(cluster.topology.client_address("b")) as client:
        client.session("b").write("all", "after-restart", {"v": "1"})


def test_status_shows_a_restarted_process(start_up):
    """A crash under `up`: the supervisor restarts it, says so, and `status` shows the count."""
    up, _ = start_up()
    up.wait_ready()
    pid = read_state(up.run_dir)["processes"]["a.frontend0"]["pid"]
    os.kill(pid, signal.SIGKILL)

    def reported() -> str:
        out = subprocess.run(
            cli(up.run_dir, "status"), cwd=ROOT, capture_output=True, text=True, timeout=scaled(60)
        )
        line = next(x for x in out.stdout.splitlines() if x.strip().startswith("a.frontend0"))
        return line if "restarts 1" in line and line.endswith("healthy") else ""

    eventually(reported, timeout=20)
    assert "a.frontend0 exited with code -9" in up.output and "a.frontend0 restarted" in up.output


def test_regions_and_serializers_on_their_own_hosts(launch, client_for):
    """Each node listens on its own host (loopback addresses 127.0.0.2 and .3 stand for machines)
    and reaches its peers there: nothing on the topology's default host, replication works."""
    data = load_topology("two-region.toml", protocol="saturn").model_dump()
    data["regions"][1]["host"] = "127.0.0.2"
    data["serializers"][0]["host"] = "127.0.0.3"
    cluster: Cluster = launch(data)
    t = cluster.topology
    assert listening("127.0.0.2", [t.frontend_port("b"), t.bulk_port("b"), t.redis_port("b")])
    assert listening("127.0.0.1", [t.frontend_port("b"), t.bulk_port("b"), t.redis_port("b")]) == []
    assert listening("127.0.0.3", [t.serializer_port("s0")])
    client = client_for(cluster)
    assert client.region("b").endpoint == f"127.0.0.2:{t.frontend_port('b')}"
    label = client.session("a").write("all", "on-another-host", {"v": "1"})
    eventually(lambda: client.session("b", label=label).read("all", "on-another-host").text("v") == "1")
