"""The compose generator (services/compose): the committed projects are what their command makes
today, and what it makes runs the launcher's process plan, wired as containers need it (no Docker)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from services import node, plan
from services.compose.__main__ import HEADER, generate, main
from services.compose.project import LAYOUT, service_name
from services.compose.reconfigure import main as reconfigure_main
from services.compose.reconfigure import plan_switch
from services.topology import Topology, TopologyError, host_variable, load_topology

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "topologies" / "demo-3region.toml"
SECRETS = ("SATURN_SECRET", "DJANGO_SECRET_KEY")
# ireland and frankfurt on one machine; the serializer on its own
HOSTS = {"virginia": "10.0.0.1", "ireland": "10.0.0.2", "frankfurt": "10.0.0.2", "s-eu": "10.0.0.3"}
PER_REGION = ["--per-region", *(arg for n, a in HOSTS.items() for arg in ("--host", f"{n}={a}"))]


COMMITTED: dict[str, list[Path]] = {}  # the first line of each compose/**/compose.yaml → its files
for _path in sorted((ROOT / "compose").glob("**/compose.yaml")):
    COMMITTED.setdefault(_path.read_text().partition("\n")[0], []).append(_path)


def args_of(header: str) -> list[str]:
    words = shlex.split(header.removeprefix(HEADER))
    assert header.startswith(HEADER) and words[:3] == ["python", "-m", "services.compose"], header
    return words[3:]


def project(out: Path, *args: str) -> dict[str, str]:
    """The files ``python -m services.compose demo-3region.toml ARGS --out OUT`` makes, by relative path."""
    return {str(p.relative_to(out)): t for p, t in generate([str(DEMO), *args, "--out", str(out)]).items()}


def env_file(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))


def is_reference(value: str, variable: str) -> bool:
    return re.fullmatch(rf"\$\{{{variable}:\?[^}}]+\}}", value) is not None


# -- the committed projects ----------------------------------------------------------------------
@pytest.mark.parametrize("header", sorted(COMMITTED), ids=lambda h: " ".join(args_of(h)))
def test_committed_project_is_what_its_command_makes(header, monkeypatch):
    """A generator change that is not regenerated (or a hand edit) fails here, naming the command."""
    monkeypatch.chdir(ROOT)
    command = header.removeprefix(HEADER)
    files = {ROOT / path: text for path, text in generate(args_of(header)).items()}
    for path, text in files.items():
        where = path.relative_to(ROOT)
        assert path.is_file(), f"{where} is missing: rerun `{command}` in {ROOT}"
        assert path.read_text() == text, f"{where} is stale: rerun `{command}` in {ROOT}"
    assert set(COMMITTED[header]) <= set(files), f"{COMMITTED[header]} not made by `{command}`"


def test_no_committed_file_is_left_over(monkeypatch):
    """A file no command makes any more (a region renamed, a per-region project regrouped) is
    stale too: every compose.yaml, topology.json and .env.example under compose/ is made by one."""
    assert COMMITTED, "no compose/**/compose.yaml: the staleness checks check nothing"
    monkeypatch.chdir(ROOT)
    made = {ROOT / path for header in COMMITTED for path in generate(args_of(header))}
    names = ("compose.yaml", "topology.json", ".env.example")
    on_disk = {p for n in names for p in (ROOT / "compose").glob(f"**/{n}") if ".build" not in p.parts}
    left_over = sorted(str(p.relative_to(ROOT)) for p in on_disk - made)
    assert not left_over, f"no command in compose/**/compose.yaml makes these (delete them): {left_over}"


# -- one host ------------------------------------------------------------------------------------
def test_one_host_project_runs_the_plan_in_region_pods(tmp_path):
    """One service per process of the plan, each region's in its pod's namespaces; stores keep their
    data in volumes; everything restarts, is health-checked and starts after what it needs."""
    files = project(tmp_path)
    compose = yaml.safe_load(files["compose.yaml"])
    services, volumes = compose["services"], compose["volumes"]
    topology = Topology.load(DEMO)
    specs = plan.processes(topology, LAYOUT, web=True)
    assert set(services) == {service_name(s) for s in specs} | set(topology.region_names)
    assert len(services) == len(specs) + len(topology.region_names)
    for service in services.values():
        assert service["restart"] == "unless-stopped" and service["healthcheck"]["test"]
    for spec in specs:
        service = services[service_name(spec)]
        assert service["environment"]["SATURN_PROCESS"] == spec.name
        assert "ports" not in service, spec.name
        if spec.region:
            assert service["network_mode"] == service["pid"] == f"service:{spec.region}"
        if spec.kind == "redis":
            [volume] = [v.split(":")[0] for v in service["volumes"] if v.endswith(":/data")]
            assert volume in volumes and not volume.startswith((".", "/")), spec.name
        elif spec.region:
            r = spec.region
            web = spec.name.endswith((".web", ".celery"))
            stores = [f"{r}-broker"] if web else [f"{r}-redis{k}" for k in range(topology.region(r).shards)]
            for store in stores:
                assert service["depends_on"][store] == {"condition": "service_healthy"}, spec.name
    inside = Topology.from_dict(json.loads(files["topology.json"]))
    assert inside.bind == "0.0.0.0"
    for node_name in inside.node_names:
        assert inside.node_host(node_name) == node_name == services[node_name]["hostname"]
    for r in topology.region_names:
        ports = {inside.frontend_port(r), inside.metrics_port(r), inside.web_port(r), inside.redis_port(r)}
        assert set(services[r]["ports"]) == {f"${{PUBLISH_ADDRESS:-127.0.0.1}}:{p}:{p}" for p in ports}
    client = json.loads(files["client/topology.json"])
    assert not [e for e in client["regions"] + client["serializers"] if "host" in e]
    outside = Topology.from_dict(client)
    assert outside.host == "127.0.0.1" and outside.bind is None
    assert outside.frontend_endpoints() == {
        r: f"127.0.0.1:{inside.frontend_port(r)}" for r in topology.region_names
    }


@pytest.mark.parametrize("args", [[], PER_REGION], ids=["one-host", "per-region"])
def test_secrets_are_only_references(args, tmp_path, monkeypatch):
    """The secrets come from .env when compose runs: none is written, even one the generator's
    environment has; every process gets $SATURN_SECRET, the web app also $DJANGO_SECRET_KEY."""
    monkeypatch.setenv("SATURN_SECRET", "secret-of-the-environment")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "key-of-the-environment")
    files = project(tmp_path, *args)
    assert not [path for path, text in files.items() if "of-the-environment" in text]
    for path in [p for p in files if p.endswith("compose.yaml")]:
        for service in yaml.safe_load(files[path])["services"].values():
            env = service.get("environment", {})
            web = env.get("SATURN_PROCESS", "").endswith((".web", ".celery"))
            assert set(SECRETS) & set(env) == (set(SECRETS) if web else {"SATURN_SECRET"} if env else set())
            assert all(is_reference(env[v], v) for v in SECRETS if v in env), env
        example = env_file(files[path.replace("compose.yaml", ".env.example")])
        assert example["SATURN_SECRET"] == example["DJANGO_SECRET_KEY"] == ""


def test_no_web_leaves_out_the_web_app(tmp_path):
    def kinds(files: dict[str, str]) -> set[str]:
        services = yaml.safe_load(files["compose.yaml"])["services"].values()
        return {s["environment"]["SATURN_PROCESS"].rpartition(".")[2] for s in services if "environment" in s}

    assert {"web", "celery", "broker"} <= kinds(project(tmp_path / "web"))
    files = project(tmp_path / "store", "--no-web")
    assert not {"web", "celery", "broker"} & kinds(files)
    compose = yaml.safe_load(files["compose.yaml"])
    topology = Topology.load(DEMO)
    specs = plan.processes(topology, LAYOUT, web=False)
    assert set(compose["services"]) == {service_name(s) for s in specs} | set(topology.region_names)
    assert not [v for v in compose["volumes"] if "broker" in v]
    for r in topology.region_names:
        assert not [p for p in compose["services"][r]["ports"] if f":{topology.web_port(r)}" in p]
    assert "DJANGO_SECRET_KEY" not in files[".env.example"]


def test_real_wan_drops_the_emulated_latencies(tmp_path):
    assert json.loads(project(tmp_path / "emulated")["topology.json"])["latency_ms"]
    files = project(tmp_path / "real", "--real-wan")
    for name in ("topology.json", "client/topology.json"):
        data = json.loads(files[name])
        assert "latency_ms" not in data and "jitter_ms" not in data, name
        assert Topology.from_dict(data).region_latency_ms("virginia", "frankfurt") == 0


# -- one project per host ------------------------------------------------------------------------
def test_per_region_projects_group_nodes_by_address(tmp_path):
    """Nodes at one address share a project on host networking; every process learns every node's
    address from .env (pods only hold namespaces: `services.node pause` reads no topology)."""
    files = project(tmp_path, *PER_REGION)
    topology = Topology.load(DEMO)
    owners = {s.name: s.owner for s in plan.processes(topology, LAYOUT, web=True)}
    variables = [host_variable(n) for n in topology.node_names]
    assert variables[-1] == "SATURN_HOST_S_EU"
    dirs = {Path(p).parts[0] for p in files}
    assert dirs == {"virginia", "ireland-frankfurt", "s-eu"}
    run: list[str] = []
    for d in dirs:
        compose = yaml.safe_load(files[f"{d}/compose.yaml"])
        assert compose["name"] == f"demo-3region-{d}"
        services = compose["services"]
        here = []
        for name, service in services.items():
            mode = service["network_mode"]
            assert mode == "host" or services[mode.removeprefix("service:")]["network_mode"] == "host", name
            assert "ports" not in service, name
            if service["command"][-1] == "pause":
                assert name in topology.region_names
                continue
            here.append(service["environment"]["SATURN_PROCESS"])
            assert all(is_reference(service["environment"][v], v) for v in variables), name
        assert len({HOSTS[owners[p]] for p in here}) == 1, f"{d} runs nodes of several hosts"
        run += here
        example = env_file(files[f"{d}/.env.example"])
        assert example == {"SATURN_SECRET": "", "DJANGO_SECRET_KEY": "", "TLS_GID": ""} | {
            host_variable(n): a for n, a in HOSTS.items()
        }
        inside = Topology.from_dict(json.loads(files[f"{d}/topology.json"]))
        assert inside.bind == "0.0.0.0" and {n: inside.node_host(n) for n in inside.node_names} == HOSTS
    assert sorted(run) == sorted(owners)  # every process once, somewhere


# -- a region's store on Redis Cluster -----------------------------------------------------------
CLUSTER_DEMO = ROOT / "topologies" / "demo-3region-cluster.toml"


@pytest.mark.parametrize("args", [[], PER_REGION], ids=["one-host", "per-region"])
def test_a_cluster_regions_store_is_formed_before_anything_uses_it(args, tmp_path):
    """Under ``[store] engine = "cluster"`` each of a region's store nodes is a service, and a
    one-shot ``<region>-store-cluster`` (``services.node form-store REGION``) makes them one Redis
    Cluster once they are all healthy: every process of the region that uses the store starts only
    after it has exited 0 (the broker does not). A node names itself as its region's host (MOVED
    says ``virginia:7210``, which a client maps to where it reaches that node), and one host
    publishes every node's port."""
    files = generate([str(CLUSTER_DEMO), *args, "--out", str(tmp_path)])
    services: dict[str, dict] = {}
    for path, text in files.items():
        if path.name == "compose.yaml":
            services |= yaml.safe_load(text)["services"]
    topology = Topology.load(CLUSTER_DEMO)
    for region in topology.region_names:
        nodes = [f"{region}-redis{k}" for k in range(topology.store_nodes(region))]
        assert len(nodes) == 6
        former = services[f"{region}-store-cluster"]
        assert former["command"][-2:] == ["form-store", region]
        assert former["restart"] == "on-failure" and "healthcheck" not in former
        assert former["network_mode"] == f"service:{region}"
        assert is_reference(former["environment"]["SATURN_SECRET"], "SATURN_SECRET")
        healthy = {"condition": "service_healthy"}
        assert {n for n, c in former["depends_on"].items() if c == healthy} == set(nodes)
        users = [
            name for name, service in services.items()
            if service.get("environment", {}).get("SATURN_PROCESS", "").startswith(f"{region}.")
            and name not in [*nodes, f"{region}-broker"]
        ]  # fmt: skip
        assert len(users) >= 5
        for name in users:
            condition = services[name]["depends_on"][f"{region}-store-cluster"]
            assert condition == {"condition": "service_completed_successfully"}, name
        for name in nodes:
            assert f"{region}-store-cluster" not in services[name]["depends_on"], name
        if not args:
            published = {int(p.rsplit(":", 1)[1]) for p in services[region]["ports"]}
            assert {topology.redis_port(region, k) for k in range(6)} <= published
    inside = Topology.from_dict(json.loads(next(t for p, t in files.items() if p.name == "topology.json")))
    for spec in plan.processes(inside, LAYOUT, web=True):
        if spec.kind == "redis" and spec.name.split(".")[1].startswith("redis"):
            (conf,) = spec.files.values()
            assert f"cluster-announce-hostname {inside.node_host(spec.region)}\n" in conf, spec.name
            assert "cluster-preferred-endpoint-type hostname\n" in conf


def test_a_node_names_itself_as_its_host_only_where_redis_can_say_it():
    """Redis takes letters, digits, '-' and '.' as a node's hostname; a host it would refuse (an IPv6
    address) is left to the node's address, rather than a node that does not start."""
    data = Topology.load(CLUSTER_DEMO).model_dump()
    data["regions"][0]["host"] = "fd00::1"
    topology = Topology.from_dict(data)
    confs = {
        spec.region: next(iter(spec.files.values()))
        for spec in plan.processes(topology, LAYOUT, web=False)
        if spec.name.endswith(".redis0")
    }
    assert "cluster-announce-hostname" not in confs["virginia"]
    assert "cluster-announce-hostname ireland\n" not in confs["ireland"]  # the topology's own host
    assert f"cluster-announce-hostname {topology.node_host('ireland')}\n" in confs["ireland"]


def test_form_store_names_what_it_cannot_form(container, capsys):
    """``services.node form-store``: an unknown region is refused, naming the regions; a region of
    standalone stores has nothing to form."""
    with pytest.raises(SystemExit, match=r"no region 'nowhere'.*virginia, ireland, frankfurt"):
        node.main(["form-store", "nowhere"])
    assert node.main(["form-store", "virginia"]) == 0
    assert "standalone stores" in capsys.readouterr().out


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--per-region"], ["regions[0].host", "regions[2].host", "serializers[0].host", "--host NODE="]),
        (["--per-region", "--host", "nosuch=1.2.3.4"], ["unknown nodes ['nosuch']"]),
        (["--per-region", "--host", "virginia"], ["--host 'virginia'", "NODE=ADDRESS"]),
        (["--per-region", "--host", "virginia="], ["--host 'virginia='", "NODE=ADDRESS"]),
        (["--host", "virginia=1.2.3.4"], ["--host is for --per-region"]),
        ([*PER_REGION, "--host", "virginia=not a host"], ["regions[0].host"]),
    ],
)
def test_bad_arguments_are_refused(args, expected, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([str(DEMO), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(e in err for e in expected), err
    assert not out.exists()  # nothing half written


def test_missing_topology_file_is_refused(tmp_path, capsys):
    path = tmp_path / "nosuch.toml"
    assert main([str(path)]) == 2
    assert capsys.readouterr().err == f"error: {path}: no such topology file\n"


CLASH = (
    'name = "clash"\nregions = [{{ name = "a", site = "A", host = "{host}", ports = {{ frontend = 7300 }} }},'
    ' {{ name = "b", site = "B", host = "10.0.0.9", ports = {{ frontend = 7300 }} }}]\n'
)


def test_regions_on_one_host_must_not_share_ports(tmp_path, capsys):
    """Two regions may use one port on two machines, not on one: whether the topology puts them
    there (refused when it loads), --host does, or a one-host project would publish both."""
    apart, together = tmp_path / "apart.toml", tmp_path / "together.toml"
    apart.write_text(CLASH.format(host="10.0.0.8"))
    together.write_text(CLASH.format(host="10.0.0.9"))
    assert len(generate([str(apart), "--per-region", "--out", str(tmp_path / "out")])) == 6
    with pytest.raises(TopologyError, match=r"10\.0\.0\.9:7300 used by both a\.frontend and b\.frontend"):
        Topology.load(together)
    for args in ([str(together), "--per-region"], [str(apart), "--per-region", "--host", "a=10.0.0.9"]):
        assert main([*args, "--out", str(tmp_path / "out2")]) == 2
        assert "10.0.0.9:7300 used by both a.frontend and b.frontend" in capsys.readouterr().err
    assert main([str(apart), "--out", str(tmp_path / "out3")]) == 2
    assert "port 7300 used by both a.frontend and b.frontend" in capsys.readouterr().err


# -- node hosts from the environment ---------------------------------------------------------------
SMALL = {
    "name": "t", "protocol": "saturn",
    "regions": [{"name": "us-east", "site": "A"}, {"name": "b", "site": "B", "host": "10.0.0.2"}],
    "serializers": [{"name": "s.eu", "site": "A"}],
    "tree": [{"a": "us-east", "b": "s.eu"}, {"a": "b", "b": "s.eu"}],
}  # fmt: skip


def test_env_hosts_override_node_hosts():
    topology = Topology.from_dict(SMALL)
    assert topology.with_env_hosts({"SATURN_HOST_NOSUCH": "10.9.9.9", "saturn_host_b": "x"}) is topology
    moved = topology.with_env_hosts({"SATURN_HOST_US_EAST": "10.0.0.1", "SATURN_HOST_S_EU": "10.0.0.3"})
    assert {n: moved.node_host(n) for n in moved.node_names} == {
        "us-east": "10.0.0.1", "b": "10.0.0.2", "s.eu": "10.0.0.3"
    }  # fmt: skip
    with pytest.raises(TopologyError, match=r"regions\[1\]\.host"):
        topology.with_env_hosts({"SATURN_HOST_B": "not a host"})


# -- the container entry point -------------------------------------------------------------------
@pytest.fixture
def container(tmp_path, monkeypatch) -> Path:
    """A generated topology.json as a container sees it, and no $SATURN_PROCESS."""
    path = tmp_path / "topology.json"
    path.write_text(project(tmp_path / "out")["topology.json"])
    monkeypatch.setattr(node, "TOPOLOGY_FILE", path)
    monkeypatch.delenv(node.PROCESS_ENV, raising=False)
    return path


def test_node_finds_the_plans_processes(container):
    topology = load_topology(str(container))
    assert str(container) in node.find(topology, "virginia.frontend0").argv
    with pytest.raises(SystemExit) as info:
        node.find(topology, "virginia.frontend9")
    message = str(info.value.code)
    assert "'virginia.frontend9'" in message
    assert all(name in message for name in ("virginia.frontend0", "serializer.s-eu", "frankfurt.celery"))


def test_node_usage_errors(container, monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:
        node.main(["run"])
    assert info.value.code == 2 and "$SATURN_PROCESS" in capsys.readouterr().err
    monkeypatch.setenv(node.PROCESS_ENV, "nosuch")
    with pytest.raises(SystemExit, match="no process 'nosuch'"):
        node.main(["health"])
    monkeypatch.setenv("SATURN_HOST_VIRGINIA", "not a host")
    with pytest.raises(SystemExit, match="cannot load the topology"):
        node.main(["health", "virginia.frontend0"])


# -- names and nodes that once went wrong ---------------------------------------------------------------
PARTIAL = ROOT / "topologies" / "demo-3region-partial.toml"  # eventual, yet it names two serializers
REGION_HOSTS = ["--host", "virginia=10.0.0.1", "--host", "ireland=10.0.0.2", "--host", "frankfurt=10.0.0.3"]


@pytest.mark.parametrize(
    "hosts",
    [REGION_HOSTS, [*REGION_HOSTS, "--host", "s-us=10.0.0.4", "--host", "s-eu=10.0.0.5"]],
    ids=["regions-only", "serializers-apart"],
)
def test_per_region_projects_of_an_eventual_topology_run_something(hosts, tmp_path):
    """Without saturn no serializer runs: their addresses are not needed, and no machine gets a
    project with no services (today: refused, or `services: {}` for each serializer's host)."""
    files = generate([str(PARTIAL), "--per-region", *hosts, "--out", str(tmp_path)])
    composes = {p.parent.name: yaml.safe_load(t) for p, t in files.items() if p.name == "compose.yaml"}
    assert {d for d, compose in composes.items() if not compose["services"]} == set()


@pytest.mark.parametrize(
    "args", [[], ["--per-region", "--host", "Virginia=10.0.0.1", "--host", "us.east=10.0.0.2"]]
)
def test_project_names_are_valid_for_compose(args, tmp_path):
    """Compose takes a project name of lowercase letters, digits, '-' and '_' only, starting with a
    letter or digit; a topology may be named 'Demo' and its regions 'Virginia' or 'us.east'."""
    path = tmp_path / "t.toml"
    path.write_text(
        'name = "Demo"\nregions = [{ name = "Virginia", site = "A" }, { name = "us.east", site = "B" }]\n'
    )
    files = generate([str(path), *args, "--out", str(tmp_path / "out")])
    names = [yaml.safe_load(t)["name"] for p, t in files.items() if p.name == "compose.yaml"]
    assert [n for n in names if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", n)] == []


# -- reconfiguring a running project (services/compose/reconfigure.py; Docker: test_compose_docker)
def test_a_switch_leaves_the_regions_services_as_they_run(tmp_path):
    """Compose recreates a service whose definition changed: the switch must change none of the
    regions' (their processes read the new tree from their stores' records), add the new tree's
    serializer beside the old one, then keep only the new one."""
    assert main([str(DEMO), "--out", str(tmp_path)]) == 0
    old = yaml.safe_load((tmp_path / "compose.yaml").read_text())["services"]
    switch = plan_switch(tmp_path, Topology.load(ROOT / "topologies" / "demo-3region-nv.toml"))
    assert set(switch.both["services"]) == set(old) | {"e1-s-nv"}
    assert set(switch.after["services"]) == set(old) - {"s-eu"} | {"e1-s-nv"}
    assert switch.leaving == ["s-eu"]
    for name, service in old.items():
        if name != "s-eu":
            assert switch.after["services"][name] == service, name
    assert switch.both["services"]["s-eu"] == old["s-eu"]
    assert switch.after["name"] == yaml.safe_load((tmp_path / "compose.yaml").read_text())["name"]
    inside, reach = switch.inside, switch.reach
    assert inside.epoch == reach.epoch == 1
    assert inside.node_host("s-nv") == "e1-s-nv"  # the new service's name, its host name in the project
    running = load_topology(str(tmp_path / "topology.json"))
    assert inside.serializer_port("s-nv") != running.serializer_port("s-eu")
    assert reach.node_host("virginia") == "127.0.0.1"  # the stores at their published ports


def test_a_switch_to_other_regions_or_of_a_per_region_project_is_refused(tmp_path):
    assert main([str(DEMO), "--out", str(tmp_path / "one")]) == 0
    with pytest.raises(TopologyError, match="regions"):
        plan_switch(tmp_path / "one", Topology.load(ROOT / "topologies" / "causality-3region.toml"))
    assert main([str(DEMO), *PER_REGION, "--out", str(tmp_path / "many")]) == 0
    with pytest.raises(TopologyError, match="not a one-host compose project"):
        plan_switch(tmp_path / "many" / "virginia", Topology.load(DEMO))
    assert reconfigure_main([str(tmp_path / "many" / "virginia"), str(DEMO)]) == 1


def test_serializer_replica_groups_are_refused_with_a_reason(tmp_path):
    text = DEMO.read_text().replace('name = "s-eu"\n', 'name = "s-eu"\nreplicas = 2\n', 1)
    assert "replicas = 2" in text
    (tmp_path / "t.toml").write_text(text)
    with pytest.raises(TopologyError, match="replica groups"):
        generate([str(tmp_path / "t.toml"), "--out", str(tmp_path / "p")])


def test_containers_run_tls_with_certificates_made_beside_the_env(tmp_path):
    """Every service mounts its project's tls/ read-only, names its node's identity and gets the
    group that may read the keys; each host's tls/ holds its own nodes' certificates and the
    clients', and the CA's key stays in the first project's ca/, in no container."""
    out = tmp_path / "per-region"
    hosts = ["virginia=192.0.2.1", "ireland=192.0.2.2", "frankfurt=192.0.2.3", "s-eu=192.0.2.2"]
    assert main([str(DEMO), "--per-region", *(f"--host={h}" for h in hosts), "--out", str(out)]) == 0
    for d, nodes in (
        ("virginia", {"virginia"}),
        ("ireland-s-eu", {"ireland", "s-eu"}),
        ("frankfurt", {"frankfurt"}),
    ):
        tls_dir = out / d / "tls"
        assert {p.stem for p in tls_dir.glob("*.key")} == {*nodes, "client"}, d
        assert not (tls_dir / "ca.key").exists()
        assert (tls_dir / "ca.pem").read_bytes() == (out / "virginia" / "ca" / "ca.pem").read_bytes()
        assert oct(tls_dir.stat().st_mode & 0o777) == "0o750"
        assert all(oct(k.stat().st_mode & 0o777) == "0o640" for k in tls_dir.glob("*.key"))
        compose = yaml.safe_load((out / d / "compose.yaml").read_text())
        for name, service in compose["services"].items():
            if service["command"][-1] == "pause":
                continue
            assert service["environment"]["SATURN_TLS_DIR"] == "/etc/saturn/tls", name
            assert service["environment"]["SATURN_TLS_IDENTITY"] in nodes, name
            assert "./tls:/etc/saturn/tls:ro" in service["volumes"] and service["group_add"], name
        assert "TLS_GID=" in (out / d / ".env").read_text()
        assert json.loads((out / d / "topology.json").read_text())["tls"] is True
    assert oct((out / "virginia" / "ca").stat().st_mode & 0o777) == "0o700"


def test_no_tls_says_insecure_in_so_many_words(tmp_path):
    out = tmp_path / "plain"
    assert main([str(DEMO), "--no-tls", "--out", str(out)]) == 0
    inside = json.loads((out / "topology.json").read_text())
    assert not inside.get("tls") and inside["insecure"] is True  # (a default is left out)
    assert not (out / "tls").exists() and "SATURN_TLS_DIR" not in (out / "compose.yaml").read_text()


def test_the_images_lock_pins_every_runtime_dependency():
    """The containers install compose/requirements.lock only (no index at build time): a runtime
    dependency added to pyproject.toml but not to the lock breaks every container at import
    (Pillow, for Chirp's pictures, nearly did)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    wanted = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]

    def name(requirement: str) -> str:
        return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")

    lines = (root / "compose" / "requirements.lock").read_text().splitlines()
    pinned = {name(line) for line in lines if line and not line.startswith("#")}
    # uvloop is optional (services/runtime.py falls back to asyncio's loop): the images have run
    # without it so far; putting it in is a change of its own, to be measured
    missing = sorted(name(r) for r in wanted if name(r) not in pinned and name(r) != "uvloop")
    assert not missing, f"compose/requirements.lock lacks {missing}: compose/build.sh --relock"
