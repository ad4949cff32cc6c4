"""The layers' import rule, checked: each package imports only from the ones below it.

    causal_client  <  services  <  webapp  <  loadtest

The client library must run where only it is installed (a web app, a Locust worker), so it
imports nothing of the services; the services never depend on the web app; nothing but the load
test imports the load test. Imports are read from the source (``ast``), lazy ones included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ["causal_client", "services", "webapp", "loadtest"]


def imported_packages(source: str) -> set[str]:
    """The top-level packages a module's source imports (relative imports excluded)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def violations(package: str, files: dict[str, str]) -> list[str]:
    """``file: imports X`` for every import of a layer above ``package``."""
    above = set(LAYERS[LAYERS.index(package) + 1 :])
    return [
        f"{name}: imports {bad}"
        for name, source in sorted(files.items())
        for bad in sorted(imported_packages(source) & above)
    ]


def sources(package: str) -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text()
        for path in (ROOT / package).rglob("*.py")
        if "_pb2" not in path.name
    }


@pytest.mark.parametrize("package", LAYERS[:-1])
def test_no_layer_imports_one_above_it(package):
    assert violations(package, sources(package)) == []


def test_the_rule_catches_an_import_from_above_even_a_lazy_one():
    lazy = "def f():\n    from webapp.social import Social\n    import loadtest.workload.run\n"
    assert violations("services", {"services/x.py": lazy}) == [
        "services/x.py: imports loadtest", "services/x.py: imports webapp",
    ]  # fmt: skip
    assert violations("causal_client", {"c.py": "from services.topology import Topology\n"}) == [
        "c.py: imports services"
    ]
    assert violations("webapp", {"w.py": "from causal_client import Label\nfrom . import x\n"}) == []


def test_the_topology_and_its_relay_routes_do_not_import_each_other():
    """services/topology.py computes its relay routes with services/wan/routes.py, which names
    what it reads of a topology (a Protocol) instead of importing it back."""
    found = imported_modules((ROOT / "services" / "wan" / "routes.py").read_text())
    assert "services.topology" not in found, found


def test_the_region_layer_does_not_import_the_protocols_above_it():
    """services/region/ (a region's store, its gears) sits below services/protocols/; the gRPC
    gateway, which uses both, lives in services/gateway/."""
    bad = [
        name
        for name, source in sources("services").items()
        if name.startswith("services/region/") and "services.protocols" in imported_modules(source)
    ]
    assert bad == []


def imported_modules(source: str) -> set[str]:
    """Every module a source imports by absolute name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_services_reach_the_wan_emulation_only_through_services_wan():
    """The emulation's core lives in the client library (a client at a site pays it too); the
    services import it from services/wan/, the one place that re-exports it."""
    bad = [
        name
        for name, source in sources("services").items()
        if not name.startswith("services/wan/")
        and any(m == "causal_client.wan" for m in imported_modules(source))
    ]
    assert bad == []


def test_the_label_path_saturn_and_c3_share_is_a_package_of_its_own():
    """C3's sender and Saturn's sink share the label pump and the links (services/labelpath/);
    neither protocol's package imports the other's."""
    c3 = [
        n
        for n, s in sources("services").items()
        if n.startswith("services/c3/") and any(m.startswith("services.saturn") for m in imported_modules(s))
    ]
    labelpath = [
        n
        for n, s in sources("services").items()
        if n.startswith("services/labelpath/")
        and any(m.startswith(("services.saturn", "services.c3")) for m in imported_modules(s))
    ]
    assert (c3, labelpath) == ([], [])


def test_the_load_test_and_the_checker_do_not_import_the_experiments():
    """loadtest/bench/ holds the experiments, above the harness (loadtest/harness/) they share;
    the load test, the checker and the harness import none of them (the command line names them
    to the registry, which imports an experiment only when it runs)."""
    bad = [
        f"{name}: {module}"
        for name, source in sources("loadtest").items()
        if not name.startswith("loadtest/bench/")
        for module in imported_modules(source)
        if module == "loadtest.bench" or module.startswith("loadtest.bench.")
    ]
    assert bad == []


def bench_modules_imported(source: str) -> set[str]:
    """The modules of loadtest/bench/ a source imports (``from loadtest.bench import x`` too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(
                a.name.rpartition(".")[2] for a in node.names if a.name.startswith("loadtest.bench.")
            )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "loadtest.bench":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("loadtest.bench."):
                found.add(node.module.split(".")[2])
    return found


def test_no_experiment_imports_another():
    """A registered experiment is run, never used as a library: what several share lives in the
    harness (loadtest/harness/) or in a family's library under loadtest/bench/ whose name says so
    (``*_family.py``), or is an experiment's own part that no other imports."""
    from loadtest.harness.registry import MODULES

    registered = set(MODULES)
    bad = [
        f"{name}: {module}"
        for name, source in sources("loadtest/bench").items()
        for module in sorted(bench_modules_imported(source))
        if module in registered
    ]
    assert bad == []
    shared: dict[str, set[str]] = {}
    for name, source in sources("loadtest/bench").items():
        for module in bench_modules_imported(source):
            shared.setdefault(module, set()).add(name)
    unnamed = sorted(m for m, users in shared.items() if len(users) > 1 and not m.endswith("_family"))
    assert unnamed == [], "modules several experiments share are a family's library: name them *_family"


def module_graph(packages: list[str]) -> dict[str, set[str]]:
    """Module → the project's modules it imports (lazy imports and ``TYPE_CHECKING`` ones too: a
    circle for the type checker is one for the reader), a package's own ``__init__`` aside."""
    paths = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            if "_pb2" not in path.name:
                name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                paths[name] = path

    def known(dotted: str) -> str | None:
        while dotted and dotted not in paths:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update(known(f"{node.module}.{alias.name}") for alias in node.names)
        graph[name] = {m for m in found if m and m != name and not name.startswith(m + ".")}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            if group:
                circles.append(sorted([*group, module]))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_module_imports_itself_through_others():
    """No import circle anywhere (the registers once imported the client that imports them, for
    types: they are typed against ``strong.Reaches`` now)."""
    assert import_circles(module_graph(LAYERS)) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


MAX_METHODS = 40  # a class with more does more than one job
MAX_LINES = 600  # a source file longer is several modules


def test_no_class_has_more_than_forty_methods_and_no_source_file_more_than_six_hundred_lines():
    """The house stays easy to enter: a big class is cut along its seams (``Topology`` into its
    fields, addresses and tree; ``Social`` into its core and reactions), a long file into modules
    with one job each."""
    crowded, long = [], []
    for package in LAYERS:
        for name, source in sources(package).items():
            if len(source.splitlines()) > MAX_LINES:
                long.append(f"{name}: {len(source.splitlines())} lines")
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.ClassDef):
                    methods = sum(isinstance(b, ast.FunctionDef | ast.AsyncFunctionDef) for b in node.body)
                    if methods > MAX_METHODS:
                        crowded.append(f"{name}: {node.name} has {methods} methods")
    assert (crowded, long) == ([], [])
