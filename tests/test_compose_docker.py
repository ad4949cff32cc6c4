"""The containers, on real Docker engines: the image built offline, the one-host demo and the
per-region projects on three "hosts", checked from a client's side; crashes lose nothing.

Every engine is a dockerd of the test's own in a network namespace the test creates
(``docker_engine.py``); nothing of the host's network is touched, and everything the test
started is gone at the end. Skipped, with the reason, where that cannot be done (not root, not
Linux, no dockerd and no apt-get). ``compose/verify.sh`` runs just these tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.deadlines import Deadline, scaled, wait_for
from helpers.docker_engine import Bridge, Engine, run, unavailable

from services.compose.__main__ import main as generate_compose

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY = "topologies/demo-3region.toml"
# The three hosts run each region's store as a Redis Cluster (three masters, a replica each).
CLUSTER_TOPOLOGY = "topologies/demo-3region-cluster.toml"
IMAGE = "saturn-twissandra:latest"
PYTHON = sys.executable
STATE_FORMAT = "{{.RestartCount}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"
# Of a checked history, what runs before the harm is done (a crash, a reconfiguration), so that
# the history has operations from before it as well as after: a hold, not a deadline (unscaled).
BEFORE_HARM_S = 4.0

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.exclusive, pytest.mark.timeout(1200)]


def say(message: str) -> None:
    print(f"[docker] {message}", flush=True)


def env_file(project: Path) -> dict[str, str]:
    """A host client's environment for ``project``: its .env, and its certificates (the
    containers run TLS: docs/OPERATIONS.md)."""
    pairs = (line.split("=", 1) for line in (project / ".env").read_text().splitlines() if "=" in line)
    env = {k: v for k, v in pairs if not k.startswith("#")}
    if (project / "tls").is_dir():
        env["SATURN_TLS_DIR"] = str(project / "tls")
    return env


@contextmanager
def timed(what: str) -> Iterator[None]:
    """Says how long the body took."""
    began = time.monotonic()
    yield
    say(f"{what} in {time.monotonic() - began:.1f} s")


def short_root(name: str) -> Path:
    """A short directory (dockerd's sockets must fit a unix socket path)."""
    return Path(tempfile.mkdtemp(prefix=f"sat{name}-", dir="/var/tmp"))


def wait_healthy(engine: Engine, container: str, restarts_before: int, timeout: float = 90) -> float:
    """Until Docker has started ``container`` again and its check passes; returns the seconds."""
    deadline = Deadline(timeout, f"{container} restarted and healthy")
    while not deadline.expired():
        state = engine.docker("inspect", "-f", STATE_FORMAT, container, check=False).stdout.split()
        if len(state) == 3 and int(state[0]) > restarts_before and state[1:] == ["running", "healthy"]:
            deadline.met()
            return deadline.elapsed()
        time.sleep(0.5)
    raise deadline.fail(f"its state {state}")


class RunningCheck:
    """``python -m loadtest check --running`` (a checked random history) in an engine's namespace,
    its output read as it comes."""

    def __init__(self, engine: Engine, project: Path, env: dict[str, str], seconds: int, out: Path):
        self.process = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{engine.name}", PYTHON, "-m", "loadtest", "check",
             "--running", str(project), "--duration", str(seconds), "--sessions", "6", "--out", str(out)],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.output: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        self.output.extend(self.process.stdout)  # type: ignore[arg-type]

    def text(self) -> str:
        return "".join(self.output)

    def history_began(self) -> None:
        """Until its sessions run (the line it says as it starts them), then BEFORE_HARM_S more."""

        def began() -> bool:
            if any(" sessions over " in line for line in self.output):
                return True
            assert self.process.poll() is None, (
                "the checker ended before its history:\n" + self.text()[-4000:]
            )
            return False

        wait_for(began, 60, "the checker's history running", interval=0.1)
        time.sleep(BEFORE_HARM_S)  # a hold (module constant)

    def finish(self, timeout: float) -> int:
        """Its exit status, within ``timeout`` seconds (the reference machine's)."""
        return self.process.wait(scaled(timeout))

    def stop(self) -> None:
        """Killed if it still runs; its output read to the end."""
        if self.process.poll() is None:
            self.process.kill()
        self.reader.join(scaled(5))


@dataclass
class OneHost:
    engine: Engine
    project: Path
    image_tar: Path

    @property
    def client_env(self) -> dict[str, str]:
        return {**os.environ, **env_file(self.project), "PYTHONPATH": str(ROOT)}

    def container(self, service: str) -> str:
        return f"demo-3region-{service}-1"


@pytest.fixture(scope="module")
def one_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OneHost]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("compose")
    engine = Engine(f"satd{os.getpid() % 100000}", short_root("d"))
    try:
        with timed("engine started"):
            engine.start()
        began = time.monotonic()
        build = run(["bash", "compose/build.sh"], timeout=900, env=engine.env, cwd=ROOT)
        say(build.stdout.strip().splitlines()[-1] + f" (the whole build {time.monotonic() - began:.0f} s)")
        image_tar = work / "image.tar"
        with timed("image saved"):
            engine.docker("save", "-o", str(image_tar), IMAGE, timeout=300)
        project = work / "demo"
        assert generate_compose([TOPOLOGY, "--out", str(project)]) == 0
        yield OneHost(engine, project, image_tar)
    finally:
        engine.stop()


def test_the_one_host_demo_comes_up_healthy_and_serves_clients_and_browsers(one_host):
    began = time.monotonic()
    one_host.engine.compose(one_host.project, "up", "-d", "--wait")
    say(f"one host: every service healthy {time.monotonic() - began:.1f} s after `up`")
    stats = one_host.engine.docker("stats", "--no-stream", "--format", "{{.Name}} {{.MemUsage}}").stdout
    say("memory per container:\n" + stats)
    probe = one_host.engine.inside(
        [PYTHON, str(ROOT / "tests" / "compose_probe.py"), str(one_host.project / "client")],
        env=one_host.client_env,
    )
    say(probe.stdout)
    assert "all checks passed" in probe.stdout


@contextmanager
def checked_history(one_host: OneHost, name: str, seconds: int) -> Iterator[None]:
    """A checked random history (``python -m loadtest check --running``) runs while the body
    does its harm; afterwards the checker must pass (no causal violation, nothing lost or
    doubled, every replica the same) and the client probe too."""
    checker = RunningCheck(
        one_host.engine,
        one_host.project / "client",
        one_host.client_env,
        seconds,
        one_host.project.parent / name,
    )
    try:
        checker.history_began()
        yield
        status = checker.finish(240)
    finally:
        checker.stop()
    assert status == 0, "the checker failed:\n" + checker.text()[-4000:]
    say(checker.text()[-1500:])
    probe = one_host.engine.inside(
        [PYTHON, str(ROOT / "tests" / "compose_probe.py"), str(one_host.project / "client")],
        env=one_host.client_env,
    )
    assert "all checks passed" in probe.stdout, probe.stdout


def test_crashed_store_serializer_and_web_app_restart_and_lose_nothing(one_host):
    """Docker restarts a store, the serializer and a web app killed (SIGKILL) together under a
    checked history, which finds no causal violation, no lost or doubled write, every replica the
    same."""
    services = ("virginia-redis0", "s-eu", "ireland-web")
    with checked_history(one_host, "check", seconds=24):
        restarts = {service: one_host.engine.crash(one_host.container(service)) for service in services}
        crashed_at = time.monotonic()
        for service, before in restarts.items():
            wait_healthy(one_host.engine, one_host.container(service), before)
            say(f"crashed {service}: restarted and healthy {time.monotonic() - crashed_at:.1f} s after")


def test_reconfigure_moves_the_running_demo_to_another_tree(one_host):
    """``python -m services.compose reconfigure`` under a checked history (paper §6.2): the new
    tree's serializer starts beside the old one, every region moves to it, the old one is
    removed, and the history shows no violation, nothing lost or doubled."""
    names = "{{.Names}}"
    with checked_history(one_host, "check-reconfigure", seconds=26):
        began = time.monotonic()
        moved = one_host.engine.inside(
            [PYTHON, "-m", "services.compose", "reconfigure", str(one_host.project),
             str(ROOT / "topologies" / "demo-3region-nv.toml")],
            env={**one_host.client_env, **one_host.engine.env}, check=False,
        )  # fmt: skip
        say(f"reconfigured in {time.monotonic() - began:.1f} s:\n{moved.stdout}{moved.stderr}")
        assert moved.returncode == 0, moved.stdout + moved.stderr + logs_of_unhealthy(one_host, moved.stdout)
    running = one_host.engine.docker("ps", "--format", names).stdout.split()
    assert one_host.container("e1-s-nv") in running
    assert one_host.container("s-eu") not in running
    compose = (one_host.project / "compose.yaml").read_text()
    assert "# Reconfigured by: python -m services.compose reconfigure" in compose
    assert "\n  s-eu:" not in compose


def logs_of_unhealthy(one_host: OneHost, output: str) -> str:
    """The last lines of every container ``docker compose up --wait`` named unhealthy."""
    names = [line.split()[1] for line in output.splitlines() if line.endswith(" is unhealthy")]
    out = []
    for name in names:
        tail = one_host.engine.docker("logs", "--tail", "40", name, check=False)
        health = one_host.engine.docker(
            "inspect", "--format", "{{json .State.Health.Log}}", name, check=False
        )
        out.append(f"\n--- {name}:\n{tail.stdout}{tail.stderr}\nits health checks: {health.stdout}")
    return "".join(out)


def test_down_removes_the_project_and_its_volumes(one_host):
    one_host.engine.compose(one_host.project, "down", "-v", "--timeout", "5")
    assert one_host.engine.docker("ps", "-aq").stdout.strip() == ""
    assert one_host.engine.docker("volume", "ls", "-q").stdout.strip() == ""


def test_three_hosts_one_region_each_its_store_a_redis_cluster(one_host, tmp_path):
    """What a user with three machines does: one dockerd per "host" (a namespace with its own
    address on a shared bridge), one per-region project on each, every peer at its address. Each
    region's store is a Redis Cluster, formed by the project's one-shot service before anything
    uses it; a master crashed under a checked history is restarted by Docker and rejoins its
    cluster (``nodes.conf`` on its volume), and nothing acknowledged is lost."""
    bridge = Bridge(f"satb{os.getpid() % 100000}").start()
    engines = [Engine(f"sath{os.getpid() % 100000}x{i}", short_root(f"h{i}")) for i in range(3)]
    try:
        with timed("three engines started"):
            for engine in engines:
                engine.start(bridge)
        with timed("the image loaded by the three engines"), ThreadPoolExecutor(len(engines)) as pool:
            list(pool.map(lambda e: e.docker("load", "-i", str(one_host.image_tar), timeout=300), engines))
        virginia, ireland, frankfurt = (e.address for e in engines)
        hosts = {"virginia": virginia, "ireland": ireland, "frankfurt": frankfurt, "s-eu": ireland}
        args = [CLUSTER_TOPOLOGY, "--per-region", "--out", str(tmp_path)]
        args += [f"--host={node}={address}" for node, address in hosts.items()]
        assert generate_compose(args) == 0
        projects = [tmp_path / "virginia", tmp_path / "ireland-s-eu", tmp_path / "frankfurt"]
        began = time.monotonic()
        failures: list[str] = []

        def up(engine: Engine, project: Path) -> None:
            done = engine.compose(project, "up", "-d", "--wait", check=False)
            if done.returncode:
                failures.append(f"{project.name}: {done.stderr[-2000:]}")

        threads = [threading.Thread(target=up, args=pair) for pair in zip(engines, projects, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(scaled(400))
        assert not failures, failures
        say(f"three hosts: every service healthy {time.monotonic() - began:.1f} s after `up`")
        env = {**os.environ, **env_file(projects[0]), "PYTHONPATH": str(ROOT)}
        probe = engines[2].inside(
            [PYTHON, str(ROOT / "tests" / "compose_probe.py"), str(projects[2])], env=env
        )
        say(probe.stdout)
        assert "all checks passed" in probe.stdout
        master = "demo-3region-cluster-virginia-virginia-redis0-1"
        check = RunningCheck(engines[0], projects[0], env, 20, tmp_path / "check")
        try:
            check.history_began()
            restarts = engines[0].crash(master)
            crashed = wait_healthy(engines[0], master, restarts)
            status = check.finish(180)
        finally:
            check.stop()
        say(check.text()[-1500:])
        assert status == 0, check.text()[-5000:]
        say(f"crashed a master of virginia's store cluster: restarted and healthy in {crashed:.1f} s")
        for engine, project in zip(engines, projects, strict=True):
            engine.compose(project, "down", "-v", "--timeout", "5")
    finally:
        for engine in engines:
            engine.stop()
        bridge.stop()
    names = run(["ip", "netns", "list"]).stdout
    leftovers = [e.name for e in engines if e.name in names] + ([bridge.name] if bridge.name in names else [])
    assert not leftovers, f"namespaces left behind: {leftovers}"
    assert not any(e.root.exists() for e in engines), "engine directories left behind"
