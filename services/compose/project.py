"""docker-compose projects made from a topology and the launcher's process plan.

Every process of the plan (``services/plan.py``) becomes one service running the project's image
(``python -m services.node run``, which finds the same process in the same plan inside the
container). A region's containers share one network and process namespace, held by the region's
"pod" service (``services.node pause``): they reach each other, and peers reach them, at the
region's host name, exactly as a region's processes do on one machine.

- :func:`one_host`: every region and serializer on one Docker host, named by compose's DNS (the
  region's pod service is its host); the ports clients need are published on the host.
- :func:`per_host`: one project per host for separate machines: host networking, every node's
  address a variable (``SATURN_HOST_<NODE>``) taken from the project's ``.env``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from services import plan
from services.auth import INSECURE_ENV, SECRET_ENV
from services.probes import READY_HEALTH
from services.topology import Topology, TopologyError, host_variable
from services.topology_parts import Region, Serializer

IMAGE = "saturn-twissandra:latest"
TOPOLOGY_IN_CONTAINER = PurePosixPath("/etc/saturn/topology.json")
MODULE_IN_IMAGE = PurePosixPath("/opt/saturn/saturn_calls.so")  # compose/Dockerfile
LAYOUT = plan.Layout(
    python="python", topology_file=TOPOLOGY_IN_CONTAINER, data_dir=PurePosixPath("/data"),
    redis_server="redis-server", redis_module=str(MODULE_IN_IMAGE),
)  # fmt: skip
# A check is a Python process that imports the project (1.4-3.4 s on two cores); while a
# reconfiguration starts containers beside it, it took over 5 s, and Docker called a healthy
# bulk receiver unhealthy: the timeout leaves it room.
HEALTH_TIMING = {"interval": "5s", "timeout": "15s", "retries": 3, "start_period": "60s"}
TLS_IN_CONTAINER = "/etc/saturn/tls"  # the project's tls/ directory, read-only
#: the group that may read the certificates' keys on the host: the containers' user is given it
TLS_GID = "TLS_GID"


@dataclass
class Project:
    """One compose project: its services and volumes, the topology its containers read, and
    what its ``.env`` must define (name → example value; empty for a secret)."""

    name: str
    topology: Topology
    services: dict[str, dict] = field(default_factory=dict)
    volumes: dict[str, dict] = field(default_factory=dict)
    variables: dict[str, str] = field(default_factory=dict)
    tls: bool = False  # every connection under TLS, the certificates in the project's tls/
    nodes: list[str] = field(default_factory=list)  # the regions and serializers it runs

    def compose(self) -> dict:
        return {"name": self.name, "services": self.services, "volumes": self.volumes}


def service_name(spec: plan.ProcessSpec) -> str:
    """``virginia.frontend0`` → ``virginia-frontend0``; a serializer is named as its node, with
    its tree's epoch after the first (``serializer.e1.s-nv`` → ``e1-s-nv``): during a
    reconfiguration both trees run in one project, and a name may be in both."""
    return spec.name.removeprefix("serializer.").replace(".", "-")


def serializer_host(topology: Topology, name: str) -> str:
    """The host name (compose service) of a serializer of ``topology``'s tree, on one host."""
    return name if topology.epoch == 0 else f"e{topology.epoch}-{name}"


def _one_replica_each(topology: Topology) -> None:
    """What the launcher runs and compose projects do not yet."""
    grouped = [s.name for s in topology.serializers if s.replicas > 1]
    if grouped:
        raise TopologyError(
            f"{topology.source}: serializers {grouped} run as replica groups, which compose projects "
            "do not run yet (the launcher does): set replicas = 1 for a compose deployment"
        )


def one_host(
    topology: Topology, web: bool = True, emulate_wan: bool = True, tls: bool = True
) -> tuple[Project, Topology]:
    """Every node in one project on one Docker host. Returns the project and the topology a
    client on the host uses (127.0.0.1 and the published ports)."""
    _one_replica_each(topology)
    topology = _secured(topology, tls)
    nodes = {r.name: {"host": r.name} for r in topology.regions}
    nodes |= {s.name: {"host": serializer_host(topology, s.name)} for s in topology.serializers}
    inside = _rewrite(topology, bind="0.0.0.0", hosts=nodes, emulate_wan=emulate_wan)
    project = Project(project_name(topology.name), inside, variables=_secrets(web, tls), tls=tls)
    project.variables["PUBLISH_ADDRESS"] = "127.0.0.1"
    for spec in plan.processes(inside, LAYOUT, web=web):
        _add(project, spec, web, host_network=False)
    for region in topology.region_names:
        ports = [inside.frontend_port(region), inside.metrics_port(region)]
        ports += [inside.web_port(region)] if web else []
        ports += [inside.redis_port(region, k) for k in range(inside.store_nodes(region))]
        project.services[region]["ports"] = [f"${{PUBLISH_ADDRESS:-127.0.0.1}}:{p}:{p}" for p in ports]
    outside = _rewrite(topology, bind=None, hosts={n: {"host": None} for n in nodes}, emulate_wan=emulate_wan)
    return project, outside.model_copy(update={"host": "127.0.0.1"})


def per_host(
    topology: Topology, hosts: dict[str, str], web: bool = True, emulate_wan: bool = True, tls: bool = True
) -> list[Project]:
    """One project per host (nodes that share a host share a project): what a user with one
    machine per region runs. ``hosts`` adds to or overrides the hosts the topology names; every
    node must have one."""
    _one_replica_each(topology)
    topology = _secured(topology, tls)
    running = _running_nodes(topology)
    unknown = sorted(set(hosts) - set(topology.node_names))
    if unknown:
        raise TopologyError(
            f"{topology.source}: --host names unknown nodes {unknown} (have {topology.node_names})"
        )
    found = {node: hosts.get(node) or _own_host(topology, node) for node in running}
    missing = [node for node, host in found.items() if host is None]
    if missing:
        raise TopologyError(
            f"{topology.source}: {', '.join(_field(topology, n) for n in missing)}: a per-host project "
            f"needs every node's address (set it in the topology, or --host NODE=ADDRESS)"
        )
    placed = {node: host for node, host in found.items() if host is not None}  # every node, now
    inside = _rewrite(
        topology, bind="0.0.0.0", hosts={n: {"host": h} for n, h in placed.items()}, emulate_wan=emulate_wan
    )
    by_host: dict[str, list[str]] = {}
    for node, host in placed.items():
        by_host.setdefault(host, []).append(node)
    projects = []
    specs = plan.processes(inside, LAYOUT, web=web)
    for nodes in by_host.values():
        project = Project(
            project_name(f"{topology.name}-{'-'.join(nodes)}"), inside, variables=_secrets(web, tls), tls=tls
        )
        project.variables |= {host_variable(n): h for n, h in placed.items()}
        for spec in specs:
            if spec.owner in nodes:
                _add(project, spec, web, host_network=True)
        projects.append(project)
    return projects


def project_name(name: str) -> str:
    """A name compose accepts for a project: lower case letters, digits, ``_`` and ``-``."""
    return re.sub(r"[^a-z0-9_-]", "-", name.lower()).lstrip("-_") or "saturn"


def _running_nodes(topology: Topology) -> list[str]:
    """The nodes that run processes: the regions, and the serializers where the protocol uses them."""
    serializers = [s.name for s in topology.serializers] if topology.traits.tree else []
    return [*topology.region_names, *serializers]


def _own_host(topology: Topology, node: str) -> str | None:
    entries: list[Region | Serializer] = [*topology.regions, *topology.serializers]
    for entry in entries:
        if entry.name == node:
            return entry.host
    return None


def _field(topology: Topology, node: str) -> str:
    if node in topology.region_names:
        return f"regions[{topology.region_names.index(node)}].host"
    names = [s.name for s in topology.serializers]
    return f"serializers[{names.index(node)}].host"


def _rewrite(topology: Topology, bind: str | None, hosts: dict[str, dict], emulate_wan: bool) -> Topology:
    data = topology.model_dump()
    data["bind"] = bind
    for key in ("regions", "serializers"):
        for entry in data[key]:
            entry.update(hosts.get(entry["name"], {}))
    if not emulate_wan:
        data["latency_ms"], data["jitter_ms"] = {}, 0.0
    return Topology.from_dict(data, source=topology.source)


def _secrets(web: bool, tls: bool) -> dict[str, str]:
    return {SECRET_ENV: "", **({"DJANGO_SECRET_KEY": ""} if web else {}), **({TLS_GID: ""} if tls else {})}


def _secured(topology: Topology, tls: bool) -> Topology:
    """The topology says which: TLS, or plaintext beyond loopback in so many words."""
    return topology.model_copy(update={"tls": tls, "insecure": not tls})


def _required(variable: str) -> str:
    return f"${{{variable}:?set {variable} in .env (compose/README.md)}}"


def _add(project: Project, spec: plan.ProcessSpec, web: bool, host_network: bool) -> None:
    """The service for one process, and its region's pod the first time the region is seen."""
    name = service_name(spec)
    env = {"SATURN_PROCESS": spec.name, SECRET_ENV: _required(SECRET_ENV)}
    if spec.name.endswith((".web", ".celery")):
        env["DJANGO_SECRET_KEY"] = _required("DJANGO_SECRET_KEY")
    if spec.name.endswith(".web") and not host_network:  # also reached at the published address
        env["DJANGO_ALLOWED_HOSTS"] = f"{spec.env['DJANGO_ALLOWED_HOSTS']},${{PUBLISH_ADDRESS:-127.0.0.1}}"
    env |= _host_variables(project)
    if spec.owner and spec.owner not in project.nodes:
        project.nodes.append(spec.owner)
    service: dict = {
        "image": IMAGE,
        "command": ["python", "-m", "services.node", "run"],
        "environment": env,
        "volumes": ["./topology.json:/etc/saturn/topology.json:ro"],
        "restart": "unless-stopped",
        "healthcheck": {"test": _health_test(project.topology, spec), **HEALTH_TIMING},
        "stop_grace_period": "10s",
    }
    if spec.region:
        pod = spec.region
        if pod not in project.services:
            project.services[pod] = _pod(project, pod, host_network)
            if project.topology.store.engine == "cluster":
                project.services[store_former(pod)] = _store_former(project, pod)
        service |= {"network_mode": f"service:{pod}", "pid": f"service:{pod}"}
        service["volumes"].append(f"{pod}-metrics:/metrics")
        service["depends_on"] = {pod: {"condition": "service_started"}}
        service["depends_on"] |= {
            service_name_of(dep): {"condition": "service_healthy"}
            for dep in _needs(project.topology, spec, pod)
        }
        if spec.kind != "redis" and store_former(pod) in project.services:
            service["depends_on"][store_former(pod)] = {"condition": "service_completed_successfully"}
    elif host_network:
        service["network_mode"] = "host"
    else:
        service["hostname"] = name
    if spec.kind == "redis":
        volume = name
        project.volumes[volume] = {}
        service["volumes"].append(f"{volume}:/data")
    _with_tls(project, service, spec.owner)
    project.services[name] = service


def _with_tls(project: Project, service: dict, identity: str | None) -> None:
    """Under TLS: the project's certificates, read-only, the node's identity, and the group that
    may read their keys (docs/OPERATIONS.md, "TLS")."""
    if not project.tls:
        service.setdefault("environment", {})[INSECURE_ENV] = "1"  # the topology says so too
        return
    service.setdefault("environment", {}).update(
        {"SATURN_TLS_DIR": TLS_IN_CONTAINER, "SATURN_TLS_IDENTITY": identity or "client"}
    )
    service.setdefault("volumes", []).append(f"./tls:{TLS_IN_CONTAINER}:ro")
    service["group_add"] = [_required(TLS_GID)]


def _pod(project: Project, region: str, host_network: bool) -> dict:
    project.volumes[f"{region}-metrics"] = {}
    pod = {
        "image": IMAGE,
        "command": ["python", "-m", "services.node", "pause"],
        "volumes": [f"{region}-metrics:/metrics"],
        "restart": "unless-stopped",
        "healthcheck": {"test": ["CMD", "true"], **HEALTH_TIMING},
        "stop_grace_period": "2s",
    }
    if host_network:
        pod["network_mode"] = "host"
    else:
        pod["hostname"] = region
    return pod


def _host_variables(project: Project) -> dict[str, str]:
    """The nodes' addresses a per-host project's containers take from its ``.env``."""
    return {v: _required(v) for v in project.variables if v.startswith("SATURN_HOST_")}


def store_former(region: str) -> str:
    """The one-shot service that makes a cluster region's store nodes one Redis Cluster."""
    return f"{region}-store-cluster"


def _store_former(project: Project, region: str) -> dict:
    """``python -m services.node form-store REGION`` once the region's store nodes are healthy
    (``services/launcher/store_cluster.py``, as the launcher does): every process of the region
    that uses the store (all but its nodes and its broker) waits until it has exited 0. Run
    again on a later ``up``, it finds the cluster formed (each node's ``nodes.conf`` is on its
    volume) and waits until every slot is served."""
    nodes = [f"{region}.redis{k}" for k in range(project.topology.store_nodes(region))]
    former = {
        "image": IMAGE,
        "command": ["python", "-m", "services.node", "form-store", region],
        "environment": {SECRET_ENV: _required(SECRET_ENV), **_host_variables(project)},
        "volumes": ["./topology.json:/etc/saturn/topology.json:ro"],
        "restart": "on-failure",
        "network_mode": f"service:{region}",
        "depends_on": {region: {"condition": "service_started"}}
        | {service_name_of(n): {"condition": "service_healthy"} for n in nodes},
    }
    _with_tls(project, former, region)
    return former


def _health_test(topology: Topology, spec: plan.ProcessSpec) -> list[str]:
    """The launcher's check for the process (``services/probes.py``, light enough to run every
    few seconds); a Saturn receiver is healthy once its remote proxy follows the tree's order,
    so a region whose peers cannot be reached says so. A worker: its process runs."""
    probe = ["CMD", "python", "-m", "services.probes"]
    if spec.kind == "redis":
        return [*probe, "redis", str(spec.port)]
    if spec.kind == "http":
        return [*probe, "http", str(spec.port), "/healthz"]
    if spec.kind == "grpc":
        return [*probe, "grpc", str(spec.port)]
    if spec.kind == "link":
        receiver = spec.name.endswith(".bulk-receiver") and topology.traits.tree
        return [*probe, "link", str(spec.port), *([READY_HEALTH] if receiver else [])]
    return ["CMD", "true"]


def _needs(topology: Topology, spec: plan.ProcessSpec, region_name: str) -> list[str]:
    """What a process of region ``region_name`` needs healthy before it starts: its region's
    stores; a worker also its region's frontend; the web app and its worker their broker."""
    region = topology.region(region_name)
    stores = [f"{region.name}.redis{k}" for k in range(topology.store_nodes(region.name))]
    if spec.kind == "redis":
        return []
    if spec.name.endswith((".web", ".celery")):
        return [f"{region.name}.broker", f"{region.name}.frontend0"]
    if spec.kind == "worker":
        return [*stores, f"{region.name}.frontend0"]
    return stores


def service_name_of(process: str) -> str:
    return process.replace(".", "-")
