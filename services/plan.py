"""The processes a topology runs: one list, whether they start as local processes (the launcher,
``services/launcher``) or as containers (the compose generator, ``services/compose``).

The plan says what each process is (its command, its port, how its health is checked, the files
it needs); a :class:`Layout` says where a deployment keeps things (the Python to run, the topology
file, the stores' data), which is all that differs between a laptop and a container.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from causal_client.tls import CA_FILE, http_scheme
from services import auth
from services.probes import READY_HEALTH, grpc_serving, http_ok, link_serving, redis_ping
from services.region import gears
from services.topology import Topology


@dataclass(frozen=True)
class Layout:
    """Where a deployment keeps things."""

    python: str  # the interpreter that runs the services
    topology_file: PurePath  # the topology every process reads (JSON, as the launcher writes it)
    data_dir: PurePath  # one directory per store and broker below it (a container's: PurePosixPath)
    redis_server: str  # the redis-server binary
    redis_module: str  # the stores' gateway module (services/region/calls_module.py)
    django_secret_key: str | None = None  # None: the process's environment has DJANGO_SECRET_KEY
    tls_dir: PurePath | None = None  # the deployment's certificates (services/certs.py); None: no TLS


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]
    kind: str  # "redis", "grpc", "link", "http" or "worker": how health is checked
    port: int | None = None
    region: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    node: str | None = None  # the region or serializer it belongs to (default: its region)
    files: dict[str, str] = field(default_factory=dict)  # written (mode 0600) before it starts
    host: str | None = None  # where it is reached, if its node is not in the deployment's topology

    @property
    def owner(self) -> str | None:
        return self.node or self.region

    @property
    def workdir(self) -> Path | None:
        """A store's data directory, made before it starts."""
        return Path(self.argv[self.argv.index("--dir") + 1]) if self.kind == "redis" else None


def metrics_region(topology: Topology, spec: ProcessSpec) -> str | None:
    """Whose metrics endpoint serves a process's metrics: its region's; a serializer's, that of
    the region at its site (its stages of a label's path, services/labelpath/stages.py), if there
    is one (a serializer of a tree being started is not in ``topology``: none)."""
    if spec.region or spec.node is None:
        return spec.region
    site = next((s.site for s in topology.serializers if s.name == spec.node), None)
    return next((r.name for r in topology.regions if r.site == site), None)


def processes(topology: Topology, layout: Layout, web: bool = False) -> list[ProcessSpec]:
    """Every process, in start order: stores, serializers (saturn), receivers (which host the
    remote proxies), frontends, then bulk senders and, where a sender does not run it, the label
    sinks (saturn); with ``web``, per region also a Celery broker, the Django app under gunicorn
    and a Celery worker."""
    t = topology
    specs: list[ProcessSpec] = []
    for r in t.regions:
        for k in range(t.store_nodes(r.name)):
            specs.append(_redis(t, layout, f"{r.name}.redis{k}", r.name, t.redis_port(r.name, k), store=k))
    specs += relays(t, layout)
    if t.traits.tree:
        specs += serializers(t, layout)
    for r in t.regions:
        specs.append(ProcessSpec(
            f"{r.name}.bulk-receiver", _service(layout, "services.bulk.receiver", r.name),
            "link", t.bulk_port(r.name), r.name,
        ))  # fmt: skip
    for r in t.regions:
        for i in range(r.frontends):
            specs.append(ProcessSpec(
                f"{r.name}.frontend{i}", _service(layout, "services.gateway.frontend", r.name, i),
                "grpc", t.frontend_port(r.name), r.name,
            ))  # fmt: skip
    for r in t.regions:
        specs.append(ProcessSpec(
            f"{r.name}.bulk-sender", _service(layout, "services.bulk.sender", r.name), "worker", None, r.name,
        ))  # fmt: skip
        if label_sink_process(t, r.name) == f"{r.name}.label-sink":
            specs.append(ProcessSpec(
                f"{r.name}.label-sink", _service(layout, "services.saturn.label_sink", r.name),
                "worker", None, r.name,
            ))  # fmt: skip
    if web:
        specs += _web(t, layout)
    return specs


def label_sink_process(t: Topology, region: str) -> str | None:
    """The process that runs ``region``'s label sink: by default the bulk sender's (one event loop
    for the region's two streams, ``[saturn] sink_in_bulk_sender``), else one of its own; None
    where the protocol has no sink. Faults and tests that mean "kill the sink" ask here."""
    if not t.traits.tree:
        return None
    return f"{region}.bulk-sender" if t.saturn.sink_in_bulk_sender else f"{region}.label-sink"


def relays(t: Topology, layout: Layout) -> list[ProcessSpec]:
    """One relay per site pair whose link has a bandwidth (services/relay/relay.py), reached at the
    deployment's host; none without ``[bandwidth_mbit]``."""
    pairs = dict.fromkeys(r.pair for r in t.relay_routes)
    return [
        ProcessSpec(
            f"relay.{pair}",
            [layout.python, "-m", "services.relay.relay",
             "--topology", str(layout.topology_file), "--pair", pair],
            "worker", None, None, node=f"relay.{pair}", host=t.host,
        )
        for pair in pairs
    ]  # fmt: skip


def serializers(t: Topology, layout: Layout) -> list[ProcessSpec]:
    """The tree's serializers, each replica a process (``.r1``, ``.r2`` after the first); those
    of a tree after the first (``reconfigure``) are named by its epoch, as both trees run side by
    side during the switch."""
    prefix = "serializer." if t.epoch == 0 else f"serializer.e{t.epoch}."
    return [
        ProcessSpec(
            f"{prefix}{sz.name}" + (f".r{r}" if r else ""),
            [layout.python, "-m", "services.saturn.serializer",
             "--topology", str(layout.topology_file), "--name", sz.name, "--index", str(r)],
            "link", t.serializer_port(sz.name, r), None, node=sz.name, host=t.node_host(sz.name),
        )
        for sz in t.serializers
        for r in range(sz.replicas)
    ]  # fmt: skip


def _service(layout: Layout, module: str, region: str, index: int = 0) -> list[str]:
    return [
        layout.python, "-m", module, "--topology", str(layout.topology_file),
        "--region", region, "--index", str(index),
    ]  # fmt: skip


# gunicorn's default access line and the time the request took (a slow page shows where)
ACCESS_LOG_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(M)sms'


def _web(t: Topology, layout: Layout) -> list[ProcessSpec]:
    specs = [_redis(t, layout, f"{r.name}.broker", r.name, t.broker_port(r.name)) for r in t.regions]
    for r in t.regions:
        env = web_env(t, layout, r.name)
        specs.append(ProcessSpec(
            f"{r.name}.web",
            [layout.python, "-m", "gunicorn", "webapp.wsgi:application",
             "--bind", f"{t.bind_host(r.name)}:{t.web_port(r.name)}", "--workers", "2", "--threads", "4",
             "--preload",  # Django imported once, then forked (no channel or thread exists before)
             "--access-logfile", "-", "--access-logformat", ACCESS_LOG_FORMAT, "--graceful-timeout", "5",
             *_gunicorn_tls(layout, r.name)],
            "http", t.web_port(r.name), r.name, env,
        ))  # fmt: skip
        specs.append(ProcessSpec(
            f"{r.name}.celery",
            [layout.python, "-m", "celery", "-A", "webapp.worker", "worker", "--pool", "threads",
             "--concurrency", "4", "--hostname", f"{r.name}@%h", "--loglevel", "INFO"],
            "worker", None, r.name, env,
        ))  # fmt: skip
    return specs


def _gunicorn_tls(layout: Layout, region: str) -> list[str]:
    """https only, with the region's certificate (browsers verify it against the deployment's
    CA, which a person adds to theirs: docs/OPERATIONS.md)."""
    if layout.tls_dir is None:
        return []
    return [
        "--certfile",
        str(layout.tls_dir / f"{region}.pem"),
        "--keyfile",
        str(layout.tls_dir / f"{region}.key"),
    ]


def web_env(t: Topology, layout: Layout, region: str) -> dict[str, str]:
    """What the web app and its worker need to know: the topology, their region, the key every
    region signs sessions and hand-offs with (unless the environment gives it)."""
    env = {
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
        "SATURN_TOPOLOGY": str(layout.topology_file),
        "SATURN_REGION": region,
        "DJANGO_ALLOWED_HOSTS": f"{t.node_host(region)},localhost,127.0.0.1",
    }
    if layout.django_secret_key:
        env["DJANGO_SECRET_KEY"] = layout.django_secret_key
    return env


def _redis(
    t: Topology, layout: Layout, name: str, region: str, port: int, store: int | None = None
) -> ProcessSpec:
    """A durable Redis: every write appended to its AOF before it is acknowledged (with the
    topology's ``appendfsync``), in a data directory that outlives the process, so a store killed
    and restarted comes back with what it acknowledged. No RDB snapshots: the AOF (with its RDB
    preamble after a rewrite) is the one copy. Its settings are in a config file only the owner
    can read (not on the command line, where any local user's `ps` would show a password): a
    store loads the gears' gateway module, and with the deployment's secret set it is the
    password of the services' (default) user, and a store has a client user that may only call
    the gears (services/auth.py). ``store``: the node's index among the region's stores (None:
    a broker); under ``[store] engine = "cluster"`` the node is one of the region's Redis
    Cluster (its membership in ``nodes.conf`` in its data directory, kept across restarts)."""
    data = name.replace(".redis", "-").replace(".broker", "-broker")
    path = layout.data_dir / f"{data}.conf"
    module = f'loadmodule "{_quoted(layout.redis_module)}" min-free-mb {t.store.min_free_mb}'
    lines = [module] if store is not None else []
    if store is not None and t.store.engine == "cluster":
        lines += [
            "cluster-enabled yes", "cluster-config-file nodes.conf",
            f"cluster-node-timeout {t.store.node_timeout_ms}",
            # A master that is down stops its own shards only, as a standalone shard's store
            # would, not the whole region until its replica is promoted.
            "cluster-require-full-coverage no",
            # A replica that must sync in full (its master restarted, or it rejoins as the new
            # master's replica) is sent the data at once: Redis waits 5 s for company by default,
            # and until a replica has it the shard acknowledges nothing (WAIT).
            "repl-diskless-sync-delay 0",
            f"cluster-port {t.cluster_bus_port(region, store)}",
            *_announced_as(t.node_host(region)),
        ]  # fmt: skip
    if secret := auth.secret():
        lines.append(f'requirepass "{_quoted(secret)}"')
        if store is not None:
            lines.append(auth.client_user_acl(gears.WATERMARK_EVENTS))
            if t.store.engine == "cluster":
                lines.append(f'masterauth "{_quoted(secret)}"')  # a replica logs in to its master
    if layout.tls_dir is not None:
        lines += _tls_lines(layout.tls_dir, region, cluster=store is not None and t.store.engine == "cluster")
    files = {str(path): "".join(f"{line}\n" for line in lines)} if lines else {}
    ports = ["--port", "0", "--tls-port", str(port)] if layout.tls_dir is not None else ["--port", str(port)]
    argv = [
        layout.redis_server, *([str(path)] if lines else []), *ports,
        "--bind", t.bind_host(region),
        "--protected-mode", "no", "--daemonize", "no", "--dir", str(layout.data_dir / data), "--save", "",
        "--appendonly", "yes", "--appendfsync", t.appendfsync,
    ]  # fmt: skip
    return ProcessSpec(name, argv, "redis", port, region, files=files)


def _tls_lines(tls_dir: PurePath, node: str, cluster: bool) -> list[str]:
    """TLS only, with the node's certificate: clients must present one of the deployment's CA
    (every service and client has one, services/certs.py), and so must a replica to its master
    and the cluster bus's peers."""
    lines = [
        f'tls-cert-file "{_quoted(str(tls_dir / f"{node}.pem"))}"',
        f'tls-key-file "{_quoted(str(tls_dir / f"{node}.key"))}"',
        f'tls-ca-cert-file "{_quoted(str(tls_dir / CA_FILE))}"',
        "tls-auth-clients yes",
        "tls-replication yes",
    ]
    return [*lines, "tls-cluster yes"] if cluster else lines


# What Redis accepts as a cluster node's hostname (cluster-announce-hostname).
ANNOUNCEABLE_HOST = re.compile(r"^[A-Za-z0-9.-]+$")


def _announced_as(host: str) -> list[str]:
    """A cluster node names itself as the topology names its region's host (MOVED says
    ``virginia:7200``, not the address a container happens to have), so that clients and
    services map the node named to where they reach it (a compose client reaches ``virginia``
    at a published port). A host Redis would refuse (an IPv6 address) is left to its address."""
    if not ANNOUNCEABLE_HOST.match(host):
        return []
    return [f"cluster-announce-hostname {host}", "cluster-preferred-endpoint-type hostname"]


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def prepare(spec: ProcessSpec) -> None:
    """What a process needs on disk before it starts: its data directory and its files."""
    if spec.workdir is not None:
        spec.workdir.mkdir(parents=True, exist_ok=True)
    for name, text in spec.files.items():
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(text)


# -- health ------------------------------------------------------------------------------------
def is_healthy(topology: Topology, spec: ProcessSpec) -> bool:
    """Redis answers PING, a gRPC server (a frontend) or a link server (a bulk receiver, a
    serializer) reports SERVING, the web app answers ``/healthz``; a worker with no port counts as
    healthy while it runs. (A Saturn receiver's remote proxy is waited for apart:
    ``proxy_in_tree_order``.)"""
    host = host_of(topology, spec)
    if spec.kind == "redis":
        return redis_ping(host, spec.port, auth.secret())
    if spec.kind == "grpc":
        return grpc_serving(f"{host}:{spec.port}")
    if spec.kind == "link":
        return link_serving(f"{host}:{spec.port}")
    if spec.kind == "http":
        return http_ok(f"{http_scheme()}://{host}:{spec.port}/healthz")
    return True


def host_of(topology: Topology, spec: ProcessSpec) -> str:
    """Where a process is reached (a serializer of a tree being started is not in ``topology``)."""
    return spec.host or (topology.node_host(spec.owner) if spec.owner else topology.host)


def proxy_in_tree_order(topology: Topology, region: str) -> bool:
    """Saturn's proxies start in timestamp order (§6.1) and switch to the tree's order once it
    has caught up; a region is ready when its proxy has."""
    return link_serving(topology.bulk_endpoint(region), service=READY_HEALTH)
