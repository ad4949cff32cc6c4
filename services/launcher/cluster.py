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
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from redis.exceptions import RedisError

from causal_client import tls
from services import auth, certs, plan
from services.launcher import store_cluster, zygote
from services.launcher.redis_binary import find_redis_server, supports_tls
from services.launcher.supervisor import Supervisor
from services.plan import ProcessSpec
from services.region import calls_module
from services.saturn import epochs
from services.topology import Topology
from services.wan import CONTROL_ENV

log = logging.getLogger("launcher")

STATE_FILE = "state.json"
TOPOLOGY_FILE = "topology.json"  # in the run directory: the topology every process reads
#: How long a started process may take to answer its health check. A process that exits fails
#: the start at once, so this bounds only one that runs and never answers; generous, because a
#: web app's first answer (gunicorn's workers importing Django) took over 30 s on a loaded
#: 2-core machine, and a start that fails there for want of patience is a false alarm.
HEALTHY_WITHIN_S = 120.0


class LaunchError(RuntimeError):
    """A process did not start or did not become healthy; the message names it and its log."""


@dataclass
class Running:
    spec: ProcessSpec
    popen: subprocess.Popen | zygote.ForkedProcess
    log_path: Path


class Cluster:
    """All processes of one topology. Use as a context manager, or ``start()`` / ``stop()``.

    ``supervise``: a process that dies is started again (``supervisor.py``); one stopped on
    purpose with :meth:`kill` stays down until :meth:`restart`. ``wan_control``: every process
    takes WAN faults (partitions, latency spikes) from :attr:`wan_control_file` (causal_client.wan)."""

    def __init__(
        self,
        topology: Topology,
        run_dir: str | Path,
        web: bool = False,
        supervise: bool = True,
        wan_control: bool = False,
    ):
        self.topology = topology
        self.run_dir = Path(run_dir).resolve()
        self.web = web  # also the web app: per region a Celery broker, gunicorn and a Celery worker
        self.supervise = supervise
        self.wan_control = wan_control
        self.processes: dict[str, Running] = {}
        self.specs: dict[str, ProcessSpec] = {}
        self.held: set[str] = set()  # stopped on purpose: not restarted by the supervisor
        self.supervisor: Supervisor | None = None
        self._outer_tls: dict[str, str | None] = {}  # this process's TLS settings before start
        self._lock = threading.RLock()  # the processes, between callers and the supervisor

    # -- plan --------------------------------------------------------------------------------
    @cached_property
    def layout(self) -> plan.Layout:
        """This machine's paths for the shared process plan (``services/plan.py``)."""
        try:
            module = str(calls_module.module_path())
        except calls_module.ModuleUnavailable as exc:
            raise LaunchError(str(exc)) from None
        return plan.Layout(
            python=sys.executable, topology_file=self.topology_file, data_dir=self.data_dir,
            redis_server=find_redis_server(), redis_module=module, django_secret_key=self.secret_key,
            tls_dir=self.tls_dir if self.topology.tls else None,
        )  # fmt: skip

    def plan(self) -> list[ProcessSpec]:
        """Every process, in start order (``services.plan.processes``)."""
        return plan.processes(self.topology, self.layout, web=self.web)

    def web_env(self, region: str) -> dict[str, str]:
        return plan.web_env(self.topology, self.layout, region)

    @property
    def data_dir(self) -> Path:
        """Every store's and broker's files, one directory each: kept when a process restarts,
        and from one ``start`` to the next unless started ``fresh``."""
        return self.run_dir / "redis"

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
    def tls_dir(self) -> Path:
        """The deployment's CA and certificates (services/certs.py), kept from one start to the
        next (``python -m services.certs rotate`` re-issues them)."""
        return self.run_dir / "tls"

    def _prepare_tls(self) -> None:
        """Under ``tls``: every certificate there and valid, and this process a client of the
        deployment (its probes, the store clusters' forming, a test's clients) until it stops."""
        if not self.topology.tls:
            return
        if not supports_tls(self.layout.redis_server):
            raise LaunchError(
                f"{self.layout.redis_server} was built without TLS, and the topology says tls = true: "
                "install Debian's redis-server (apt-get install redis-server), or point SATURN_REDIS_SERVER "
                "at a redis-server built with TLS (BUILD_TLS=yes)"
            )
        made = certs.ensure(self.tls_dir, self.topology.name, certs.identities_of(self.topology))
        if made:
            log.info("TLS: made %s in %s", ", ".join(f"{name} ({why})" for name, why in made), self.tls_dir)
        self._outer_tls = {k: os.environ.get(k) for k in (tls.TLS_DIR_ENV, tls.IDENTITY_ENV)}
        os.environ[tls.TLS_DIR_ENV] = str(self.tls_dir)
        os.environ.pop(tls.IDENTITY_ENV, None)  # this process is a client

    def _restore_tls(self) -> None:
        for key, value in self._outer_tls.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._outer_tls = {}

    def _tls_env(self, spec: ProcessSpec) -> dict[str, str]:
        """A process's TLS identity: its node's certificate (one of a tree being started is made
        now), else the clients'."""
        if not self.topology.tls:
            return {auth.INSECURE_ENV: "1"} if self.topology.insecure else {}
        identity = spec.owner or tls.CLIENT_IDENTITY
        if not (self.tls_dir / f"{identity}.pem").is_file():
            names = (plan.host_of(self.topology, spec), *certs.LOOPBACK)
            certs.ensure(self.tls_dir, self.topology.name, [certs.Identity(identity, names)])
        return {tls.TLS_DIR_ENV: str(self.tls_dir), tls.IDENTITY_ENV: identity}

    @property
    def wan_control_file(self) -> Path:
        return self.run_dir / "wan.json"

    @property
    def topology_file(self) -> Path:
        return self.run_dir / TOPOLOGY_FILE

    def metrics_dir(self, region: str) -> Path:
        return self.run_dir / "metrics" / region

    # -- life cycle --------------------------------------------------------------------------
    def start(self, timeout: float = HEALTHY_WITHIN_S, fresh: bool = False) -> Cluster:
        """Starts every process and waits until all are healthy. The stores keep their data
        from an earlier start in the same run directory, unless ``fresh``."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "logs").mkdir(exist_ok=True)
        self._check_ports_free()
        self._prepare_tls()
        try:
            self._check_credentials()
            self._prepare_data(fresh)
        except BaseException:
            self._restore_tls()
            raise
        self.topology_file.write_text(self.topology.model_dump_json(indent=2))
        for region in self.topology.region_names:
            shutil.rmtree(self.metrics_dir(region), ignore_errors=True)
            self.metrics_dir(region).mkdir(parents=True)
        try:
            stores_ready = False
            for spec in self.plan():
                if spec.kind != "redis" and not stores_ready:
                    self._form_store_clusters(timeout)
                    if self.topology.traits.tree:
                        epochs.publish(self.topology, start=True)  # the tree every region starts on
                    stores_ready = True
                self.specs[spec.name] = spec
                self._spawn(spec)
                if spec.kind == "redis":
                    self._wait_healthy(spec, timeout)
            for spec in self.specs.values():
                self._wait_healthy(spec, timeout)
            if self.topology.traits.tree:
                self.wait_proxies_in_tree_order(timeout)
        except BaseException:
            self.stop()
            raise
        if self.supervise:
            self.supervisor = Supervisor(
                self._exit_code, self._supervised, self._respawn, self._write_state
            ).start()
        self._write_state()
        return self

    def _form_store_clusters(self, timeout: float) -> None:
        """Under ``[store] engine = "cluster"``, makes each region's nodes one Redis Cluster."""
        if self.topology.store.engine != "cluster":
            return
        for region in self.topology.region_names:
            try:
                store_cluster.form(self.topology, region, auth.secret(), timeout)
            except (store_cluster.ClusterFormError, RedisError) as exc:
                raise LaunchError(f"{region}'s store cluster: {exc}") from None

    def _check_credentials(self) -> None:
        """Nothing listens beyond loopback without the deployment's secret (services/auth.py)."""
        for node in [*self.topology.region_names, *(s.name for s in self.topology.serializers)]:
            try:
                auth.require_for(self.topology.bind_host(node), f"{node}'s services", self.topology.insecure)
            except auth.CredentialsRequired as exc:
                raise LaunchError(str(exc)) from None

    def _prepare_data(self, fresh: bool) -> None:
        """Data of an earlier start is kept only for a topology that shapes it the same way
        (protocol, regions, shards, groups): anything else could not make sense of it."""
        marker = self.data_dir / "shape.json"
        shape = json.dumps(self.topology.data_shape(), sort_keys=True)
        if fresh:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        elif marker.exists() and marker.read_text() != shape:
            raise LaunchError(
                f"{self.data_dir} holds the data of a different topology (protocol, regions, shards "
                f"or groups differ): start fresh to discard it (`up --fresh`), or use another --run-dir"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text(shape)

    # -- supervision (called by the supervisor's thread) -------------------------------------
    def _supervised(self) -> list[str]:
        with self._lock:
            return [name for name in self.processes if name not in self.held]

    def _exit_code(self, name: str) -> int | None:
        with self._lock:
            running = self.processes.get(name)
            return None if running is None or name in self.held else running.popen.poll()

    def _respawn(self, name: str) -> None:
        with self._lock:
            if name not in self.held and name in self.processes:
                self._spawn(self.specs[name])

    def _spawn(self, spec: ProcessSpec) -> None:
        plan.prepare(spec)
        log_path = self.run_dir / "logs" / f"{spec.name}.log"
        env = zygote.python_env({**os.environ, **spec.env, **self._tls_env(spec)})
        if metrics_region := plan.metrics_region(self.topology, spec):
            env["PROMETHEUS_MULTIPROC_DIR"] = str(self.metrics_dir(metrics_region))
        if self.wan_control:
            env[CONTROL_ENV] = str(self.wan_control_file)
        popen = zygote.start(spec.argv, env, self.run_dir, log_path)
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

    def wait_proxies_in_tree_order(self, timeout: float) -> None:
        """Saturn's proxies start in timestamp order (§6.1) and switch to the tree's order once
        it has caught up; a topology is ready when every region's proxy has."""
        deadline = time.monotonic() + timeout
        for region in self.topology.region_names:
            while not plan.proxy_in_tree_order(self.topology, region):
                if time.monotonic() > deadline:
                    raise LaunchError(f"{region}'s remote proxy did not reach tree order in {timeout:.0f}s")
                time.sleep(0.05)

    def is_healthy(self, spec: ProcessSpec) -> bool:
        return plan.is_healthy(self.topology, spec)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the services in reverse start order, then to the stores (so that no service
        sees its store vanish while it drains); SIGKILL whatever is still there after ``timeout``."""
        if self.supervisor is not None:
            self.supervisor.stop()
            self.supervisor = None
        with self._lock:
            self.held.update(self.processes)
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
        with self._lock:
            self.processes.clear()
            self.held.clear()
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)
        self._restore_tls()

    # -- changing the set of processes (reconfiguration) -------------------------------------
    def add(self, specs: list[ProcessSpec], timeout: float = HEALTHY_WITHIN_S) -> None:
        """Starts more processes (supervised like the rest) and waits until they are healthy."""
        for spec in specs:
            with socket.socket() as sock:
                if spec.port and sock.connect_ex((plan.host_of(self.topology, spec), spec.port)) == 0:
                    raise LaunchError(f"port {spec.port} ({spec.name}) is already in use")
        with self._lock:
            for spec in specs:
                self.specs[spec.name] = spec
                self._spawn(spec)
        for spec in specs:
            self._wait_healthy(spec, timeout)
        self._write_state()

    def remove(self, names: list[str]) -> None:
        """Stops processes for good (SIGTERM): they leave the cluster."""
        for name in names:
            self.kill(name, signal.SIGTERM)
        with self._lock:
            for name in names:
                self.processes.pop(name, None)
                self.specs.pop(name, None)
                self.held.discard(name)
        self._write_state()

    def replace_topology(self, topology: Topology) -> None:
        """The topology processes read when they (re)start: the new tree after a reconfiguration."""
        self.topology = topology
        tmp = self.topology_file.with_suffix(".tmp")
        tmp.write_text(topology.model_dump_json(indent=2))
        tmp.replace(self.topology_file)

    # -- crash testing -----------------------------------------------------------------------
    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stops a process on purpose (SIGKILL: a crash); it stays down until :meth:`restart`."""
        with self._lock:
            self.held.add(name)
            running = self.processes[name]
        running.popen.send_signal(sig)
        running.popen.wait(10)
        self._write_state()

    def restart(self, name: str, timeout: float = HEALTHY_WITHIN_S) -> None:
        with self._lock:
            if self.processes[name].popen.poll() is None:
                self.kill(name, signal.SIGTERM)
            self._spawn(self.specs[name])
            self.held.discard(name)
            if self.supervisor is not None:
                self.supervisor.started(name)
        self._wait_healthy(self.specs[name], timeout)
        self._write_state()

    # -- reporting ---------------------------------------------------------------------------
    def _write_state(self) -> None:
        with self._lock:
            if not self.processes:
                return  # stopped: no state file
            watches = self.supervisor.watches if self.supervisor is not None else {}
            processes = {}
            for name, r in self.processes.items():
                watch = watches.get(name)
                processes[name] = {
                    "pid": r.popen.pid, "kind": r.spec.kind, "port": r.spec.port,
                    "host": plan.host_of(self.topology, r.spec),
                    "region": r.spec.region, "log": str(r.log_path),
                    "restarts": watch.restarts if watch else 0,
                    "state": "stopped" if name in self.held else (watch.state if watch else "running"),
                }  # fmt: skip
            state = {"topology": self.topology.source, "launcher_pid": os.getpid(), "processes": processes}
            path = self.run_dir / STATE_FILE
            path.with_suffix(".tmp").write_text(json.dumps(state, indent=2))
            path.with_suffix(".tmp").replace(path)  # a reader never sees half a file

    def endpoints(self) -> list[tuple[str, str]]:
        t = self.topology
        rows = []
        for r in t.regions:
            if self.web:
                rows.append((f"{r.name} web app", t.web_url(r.name) + "/"))
            rows.append((f"{r.name} store (clients)", t.client_address(r.name)))
            rows.append((f"{r.name} gateway (gRPC)", t.frontend_endpoint(r.name)))
            rows.append((f"{r.name} metrics", t.metrics_url(r.name)))
        return rows

    def _check_ports_free(self) -> None:
        for owner, host, port in self.topology.all_addresses():
            with socket.socket() as sock:
                if sock.connect_ex((host, port)) == 0:
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


def read_state(run_dir: str | Path) -> dict | None:
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None
