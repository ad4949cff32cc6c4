"""Moves a running one-host compose deployment to a new serializer tree without stopping it
(paper §6.2): ``python -m services.compose reconfigure PROJECT NEW.toml``.

The same protocol as the launcher's ``reconfigure`` (``services/launcher/reconfigure.py``), with
Docker Compose doing the starting and stopping: every region's tree record (in its store, reached
at the published ports) names the new tree; ``docker compose up`` starts the new tree's
serializers beside the old ones (the project's file then lists both trees, and the region
services, unchanged, are left running); the records tell the label sinks to send on the new tree
and the command waits until every sink and remote proxy has moved; then the project's file keeps
only the new tree and ``up --remove-orphans`` stops the old serializers. The project's
``topology.json`` (and ``client/topology.json``) describe the new tree from the first step, so a
container restarted later reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from causal_client import tls
from services import certs
from services.compose.files import HEADER, dump, topology_json
from services.compose.project import one_host
from services.saturn import epochs
from services.topology import Topology, TopologyError

Report = Callable[[str], None]
RECONFIGURED = "# Reconfigured by: "


class ComposeError(RuntimeError):
    """``docker compose`` failed; the message carries the end of what it printed."""


@dataclass
class Switch:
    """What a reconfiguration writes: the new tree as the containers see it (``inside``, named
    in the tree records) and as this host reaches it (``reach``), and the project's file while
    both trees run (``both``) and after (``after``)."""

    inside: Topology
    reach: Topology
    both: dict
    after: dict
    leaving: list[str]


def plan_switch(project_dir: Path, offered: Topology) -> Switch:
    """The switch of ``project_dir``'s deployment to ``offered``'s tree. Raises TopologyError
    (not a one-host project, other regions, or no tree to change)."""
    client_file, compose_file = project_dir / "client" / "topology.json", project_dir / "compose.yaml"
    if not client_file.is_file() or not compose_file.is_file():
        raise TopologyError(
            f"{project_dir}: not a one-host compose project (no compose.yaml and client/topology.json); "
            "a per-region deployment is reconfigured host by host (compose/README.md)"
        )
    old_services: dict = yaml.safe_load(compose_file.read_text())["services"]
    web = any(name.endswith("-web") for name in old_services)
    running = Topology.from_dict(json.loads(client_file.read_text()), source=str(client_file))
    new = epochs.next_tree(running, offered)
    project, reach = one_host(new, web=web, tls=running.tls)  # as it was generated
    leaving = {name: s for name, s in old_services.items() if name not in project.services}
    both = project.compose() | {"services": project.services | leaving}
    return Switch(project.topology, reach, both, project.compose(), sorted(leaving))


def reconfigure(
    project_dir: Path,
    offered: Topology,
    timeout: float = 120.0,
    report: Report = print,
    compose: tuple[str, ...] = ("docker", "compose"),
    reconfigured_by: str = "",
) -> Topology:
    """Moves the deployment of ``project_dir`` to ``offered``'s tree; returns the topology its
    clients use now. Raises TopologyError (see :func:`plan_switch`), ComposeError, or
    TimeoutError (a region did not move within ``timeout``)."""
    started = time.monotonic()
    switch = plan_switch(project_dir, offered)
    compose_file = project_dir / "compose.yaml"
    header = _headers(compose_file.read_text(), reconfigured_by)
    _load_secrets(project_dir / ".env")
    _new_nodes_certificates(project_dir, switch.inside)
    epoch = switch.inside.epoch
    report(f"epoch {epoch - 1} → {epoch}: {len(switch.inside.serializers)} serializers of the new tree")

    epochs.publish(switch.inside, send=False, reach=switch.reach)
    (project_dir / "topology.json").write_text(topology_json(switch.inside))
    (project_dir / "client" / "topology.json").write_text(topology_json(switch.reach))
    compose_file.write_text(header + dump(switch.both))
    _compose(compose, project_dir, "up", "-d", "--wait", timeout=timeout)
    report(f"the new tree's serializers run ({time.monotonic() - started:.2f}s); sinks to send on it")

    epochs.publish(switch.inside, send=True, reach=switch.reach)
    epochs.wait_moved(epoch, switch.reach, timeout)
    report(f"every proxy delivers the new tree's labels ({time.monotonic() - started:.2f}s); "
           f"stopping the old serializers {switch.leaving}")  # fmt: skip
    compose_file.write_text(header + dump(switch.after))
    _compose(compose, project_dir, "up", "-d", "--wait", "--remove-orphans", timeout=timeout)
    report(f"done in {time.monotonic() - started:.2f}s: every region on the tree of epoch {epoch}")
    return switch.reach


def _new_nodes_certificates(project_dir: Path, inside: Topology) -> None:
    """Under TLS: certificates for the new tree's serializers (named by their new hosts), from the
    project's CA, and this process a client of the deployment (it reaches the stores)."""
    tls_dir, ca_dir = project_dir / "tls", project_dir / "ca"
    if not tls_dir.is_dir():
        return
    os.environ.setdefault(tls.TLS_DIR_ENV, str(tls_dir.resolve()))
    authority = certs.Authority.load(ca_dir)
    certs.ensure(tls_dir, inside.name, certs.identities_of(inside), authority=authority, group_readable=True)


def _load_secrets(env_file: Path) -> None:
    """The project's secrets (the stores' password), unless this process was given them."""
    if not env_file.is_file():
        return
    for line in env_file.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not name.startswith("#"):
            os.environ.setdefault(name.strip(), value.strip())


def _headers(text: str, reconfigured_by: str) -> str:
    """The file's first line (the command that generated it) and the reconfiguration's."""
    lines = [line for line in text.splitlines()[:1] if line.startswith(HEADER)]
    if reconfigured_by:
        lines.append(RECONFIGURED + reconfigured_by)
    return "".join(line + "\n" for line in lines)


def _compose(command: tuple[str, ...], project_dir: Path, *args: str, timeout: float) -> None:
    try:
        done = subprocess.run(
            [*command, *args], cwd=project_dir, capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ComposeError(f"{shlex.join([*command, *args])}: {exc}") from exc
    if done.returncode:
        raise ComposeError(f"{shlex.join([*command, *args])} failed:\n{(done.stdout + done.stderr)[-2000:]}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m services.compose reconfigure", description=__doc__.split("\n")[0]
    )
    parser.add_argument("project", help="a one-host project's directory (its compose.yaml)")
    parser.add_argument("topology", help="a topology file with the new tree (topologies/*.toml)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step (default 120)")
    args = parser.parse_args(argv)
    try:
        offered = Topology.load(args.topology)
        reconfigure(
            Path(args.project), offered, args.timeout,
            reconfigured_by=shlex.join(["python", "-m", "services.compose", "reconfigure", *argv]),
        )  # fmt: skip
    except (TopologyError, ComposeError, TimeoutError, OSError) as exc:
        print(f"error: {exc}")
        return 1
    return 0
