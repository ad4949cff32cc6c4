"""Starts, watches and stops every process of a topology on this machine.

The same class serves the command line (`python -m services.launcher up ...`) and the tests
(a pytest fixture), so that what the tests run is what a person runs.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.launcher import spawner
from services.launcher.redis_binary import find_redis_server
from services.topology import Topology

log = logging.getLogger("launcher")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STATE_FILE = "state.json"


class LaunchError(RuntimeError):
    """A process did not start or did not become healthy; the message names it and its log."""


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]
    kind: str  # "redis", "grpc", "http" or "worker": how health is checked
    port: int | None = None
    region: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Running:
    spec: ProcessSpec
    popen: subprocess.Popen
    log_path: Path


class Cluster:
    """All processes of one topology. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, topology: Topology, run_dir: str | Path, web: bool = False):
        self.topology = topology
        self.run_dir = Path(run_dir).resolve()
        self.web = web  # also the web app: per region a Celery broker, gunicorn and a Celery worker
        self.processes: dict[str, Running] = {}
        self.specs: dict[str, ProcessSpec] = {}

    # -- plan --------------------------------------------------------------------------------
    def _service(self, module: str, region: str, index: int = 0) -> list[str]:
        return [
            sys.executable, "-m", module, "--topology", str(self.topology_file),
            "--region", region, "--index", str(index),
        ]  # fmt: skip

    def plan(self) -> list[ProcessSpec]:
        """Every process, in start order: stores, serializers (saturn), receivers (which host the
        remote proxies), frontends, then bulk senders and label sinks (saturn)."""
        t = self.topology
        redis_bin = find_redis_server()
        specs: list[ProcessSpec] = []
        for r in t.regions:
            for k in range(r.shards):
                data_dir = self.run_dir / "redis" / f"{r.name}-{k}"
                specs.append(ProcessSpec(
                    f"{r.name}.redis{k}",
                    [redis_bin, "--port", str(t.redis_port(r.name, k)), "--bind", t.host,
                     "--save", "", "--appendonly", "no", "--daemonize", "no",
                     "--dir", str(data_dir), "--protected-mode", "no"],
                    "redis", t.redis_port(r.name, k), r.name,
                ))  # fmt: skip
        if t.protocol == "saturn":
            for sz in t.serializers:
                specs.append(ProcessSpec(
                    f"serializer.{sz.name}",
                    [sys.executable, "-m", "services.saturn.serializer",
                     "--topology", str(self.topology_file), "--name", sz.name],
                    "grpc", t.serializer_port(sz.name), None,
                ))  # fmt: skip
        for r in t.regions:
            specs.append(ProcessSpec(
                f"{r.name}.bulk-receiver", self._service("services.bulk.receiver", r.name),
                "grpc", t.bulk_port(r.name), r.name,
            ))  # fmt: skip
        for r in t.regions:
            for i in range(r.frontends):
                specs.append(ProcessSpec(
                    f"{r.name}.frontend{i}", self._service("services.region.frontend", r.name, i),
                    "grpc", t.frontend_port(r.name), r.name,
                ))  # fmt: skip
        for r in t.regions:
            specs.append(ProcessSpec(
                f"{r.name}.bulk-sender", self._service("services.bulk.sender", r.name),
                "worker", None, r.name,
            ))  # fmt: skip
            if t.protocol == "saturn":
                specs.append(ProcessSpec(
                    f"{r.name}.label-sink", self._service("services.saturn.label_sink", r.name),
                    "worker", None, r.name,
                ))  # fmt: skip
        if self.web:
            specs += self._web_plan(redis_bin)
        return specs

    def _web_plan(self, redis_bin: str) -> list[ProcessSpec]:
        """Per region: a Redis for Celery, the Django app under gunicorn, and a Celery worker."""
        t = self.topology
        specs: list[ProcessSpec] = []
        for r in t.regions:
            data_dir = self.run_dir / "redis" / f"{r.name}-broker"
            specs.append(ProcessSpec(
                f"{r.name}.broker",
                [redis_bin, "--port", str(t.broker_port(r.name)), "--bind", t.host, "--save", "",
                 "--appendonly", "no", "--daemonize", "no", "--dir", str(data_dir), "--protected-mode", "no"],
                "redis", t.broker_port(r.name), r.name,
            ))  # fmt: skip
        for r in t.regions:
            env = self.web_env(r.name)
            specs.append(ProcessSpec(
                f"{r.name}.web",
                [sys.executable, "-m", "gunicorn", "webapp.wsgi:application",
                 "--bind", f"{t.host}:{t.web_port(r.name)}", "--workers", "2", "--threads", "4",
                 "--access-logfile", "-", "--graceful-timeout", "5"],
                "http", t.web_port(r.name), r.name, env,
            ))  # fmt: skip
            specs.append(ProcessSpec(
                f"{r.name}.celery",
                [sys.executable, "-m", "celery", "-A", "webapp.worker", "worker", "--pool", "threads",
                 "--concurrency", "4", "--hostname", f"{r.name}@%h", "--loglevel", "INFO"],
                "worker", None, r.name, env,
            ))  # fmt: skip
        return specs

    def web_env(self, region: str) -> dict[str, str]:
        """What the web app and its worker need to know: the topology, their region, the key
        every region signs sessions and hand-offs with."""
        return {
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
            "SATURN_TOPOLOGY": str(self.topology_file),
            "SATURN_REGION": region,
            "DJANGO_SECRET_KEY": self.secret_key,
            "DJANGO_ALLOWED_HOSTS": f"{self.topology.host},localhost,127.0.0.1",
        }

    @property
    def secret_key(self) -> str:
        """DJANGO_SECRET_KEY if set, else one made for this run directory and kept in it."""
        if os.environ.get("DJANGO_SECRET_KEY"):
            return os.environ["DJANGO_SECRET_KEY"]
        path = self.run_dir / "secret_key"
        if not path.exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(50))
        return path.read_text().strip()

    @property
    def topology_file(self) -> Path:
        return self.run_dir / "topology.json"

    def metrics_dir(self, region: str) -> Path:
        return self.run_dir / "metrics" / region

    # -- life cycle --------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> Cluster:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(exist_ok=True)
        self._check_ports_free()
        self.topology_file.write_text(self.topology.model_dump_json(indent=2))
        for region in self.topology.region_names:
            shutil.rmtree(self.metrics_dir(region), ignore_errors=True)
            self.metrics_dir(region).mkdir(parents=True)
        try:
            for spec in self.plan():
                self.specs[spec.name] = spec
                self._spawn(spec)
                if spec.kind == "redis":
                    self._wait_healthy(spec, timeout)
            for spec in self.specs.values():
                self._wait_healthy(spec, timeout)
            if self.topology.protocol == "saturn":
                self._wait_proxies_in_tree_order(timeout)
        except BaseException:
            self.stop()
            raise
        self._write_state()
        return self

    def _spawn(self, spec: ProcessSpec) -> None:
        if spec.kind == "redis":
            Path(spec.argv[spec.argv.index("--dir") + 1]).mkdir(parents=True, exist_ok=True)
        log_path = self.run_dir / "logs" / f"{spec.name}.log"
        env = {**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        if spec.region:
            env["PROMETHEUS_MULTIPROC_DIR"] = str(self.metrics_dir(spec.region))
        with open(log_path, "ab") as log_file:
            popen = spawner.popen(
                [sys.executable, "-m", "services.launcher.orphan_guard", str(os.getpid()), "--", *spec.argv],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.run_dir, start_new_session=True,
            )  # fmt: skip
        self.processes[spec.name] = Running(spec, popen, log_path)

    def _wait_healthy(self, spec: ProcessSpec, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        running = self.processes[spec.name]
        while time.monotonic() < deadline:
            if running.popen.poll() is not None:
                raise LaunchError(
                    f"{spec.name} exited with code {running.popen.returncode}; "
                    f"log {running.log_path}:\n{_tail(running.log_path)}"
                )
            if self.is_healthy(spec):
                return
            time.sleep(0.05)
        raise LaunchError(f"{spec.name} not healthy after {timeout:.0f}s; log {running.log_path}")

    def _wait_proxies_in_tree_order(self, timeout: float) -> None:
        """Saturn's proxies start in timestamp order (§6.1) and switch to the tree's order once
        it has caught up; a topology is ready when every region's proxy has."""
        deadline = time.monotonic() + timeout
        for region in self.topology.region_names:
            endpoint = self.topology.bulk_endpoint(region)
            while not _grpc_serving(endpoint, service="proxy"):
                if time.monotonic() > deadline:
                    raise LaunchError(f"{region}'s remote proxy did not reach tree order in {timeout:.0f}s")
                time.sleep(0.05)

    def is_healthy(self, spec: ProcessSpec) -> bool:
        if spec.kind == "redis":
            return _redis_ping(self.topology.host, spec.port)
        if spec.kind == "grpc":
            return _grpc_serving(f"{self.topology.host}:{spec.port}")
        if spec.kind == "http":
            return _http_ok(f"http://{self.topology.host}:{spec.port}/healthz")
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the services in reverse start order, then to the stores (so that no service
        sees its store vanish while it drains); SIGKILL whatever is still there after ``timeout``."""
        running = list(self.processes.values())
        services = [r for r in running if r.spec.kind != "redis"]
        stores = [r for r in running if r.spec.kind == "redis"]
        deadline = time.monotonic() + timeout
        for tier in (services, stores):
            for proc in reversed(tier):
                if proc.popen.poll() is None:
                    proc.popen.send_signal(signal.SIGTERM)
            for proc in tier:
                try:
                    proc.popen.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    log.warning("%s ignored SIGTERM; killing it", proc.spec.name)
                    proc.popen.kill()
                    proc.popen.wait()
        self.processes.clear()
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)

    # -- crash testing -----------------------------------------------------------------------
    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        running = self.processes[name]
        running.popen.send_signal(sig)
        running.popen.wait(10)

    def restart(self, name: str, timeout: float = 30.0) -> None:
        if self.processes[name].popen.poll() is None:
            self.kill(name, signal.SIGTERM)
        self._spawn(self.specs[name])
        self._wait_healthy(self.specs[name], timeout)
        self._write_state()

    # -- reporting ---------------------------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "topology": self.topology.source,
            "launcher_pid": os.getpid(),
            "processes": {
                name: {
                    "pid": r.popen.pid, "kind": r.spec.kind, "port": r.spec.port,
                    "region": r.spec.region, "log": str(r.log_path),
                }
                for name, r in self.processes.items()
            },
        }  # fmt: skip
        (self.run_dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    def endpoints(self) -> list[tuple[str, str]]:
        t = self.topology
        rows = []
        for r in t.regions:
            if self.web:
                rows.append((f"{r.name} web app", t.web_url(r.name) + "/"))
            rows.append((f"{r.name} frontend (gRPC)", t.frontend_endpoint(r.name)))
            rows.append((f"{r.name} metrics", f"http://{t.host}:{t.metrics_port(r.name)}/metrics"))
        return rows

    def _check_ports_free(self) -> None:
        for owner, port in self.topology.all_ports():
            with socket.socket() as sock:
                if sock.connect_ex((self.topology.host, port)) == 0:
                    raise LaunchError(
                        f"port {port} ({owner}) is already in use: another topology running? "
                        f"(try `python -m services.launcher status`, or --base-port)"
                    )

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _redis_ping(host: str, port: int | None) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except (OSError, ValueError):
        return False


def _grpc_serving(endpoint: str, service: str = "") -> bool:
    try:
        with grpc.insecure_channel(endpoint) as channel:
            request = health_pb2.HealthCheckRequest(service=service)
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=0.5)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def read_state(run_dir: str | Path) -> dict | None:
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None
