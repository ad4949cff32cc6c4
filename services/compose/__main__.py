"""Writes docker-compose projects for a topology: ``python -m services.compose TOPOLOGY``.

One project with every region on one Docker host (``compose/<name>/``), or with ``--per-region``
one project per host (``compose/<name>-per-region/<project>/``), each with its ``compose.yaml``, the
``topology.json`` its containers read, an ``.env.example`` naming the variables it needs, and an
``.env`` with fresh secrets if there is none yet (never committed). The first line of every
``compose.yaml`` is the command that made it: the tests remake each committed file with it and
fail when one is stale.

``python -m services.compose reconfigure PROJECT NEW.toml`` moves a running one-host deployment
to a new serializer tree (``reconfigure.py``).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import sys
from pathlib import Path

from causal_client import tls
from services import certs
from services.compose import reconfigure
from services.compose.files import HEADER, dump, topology_json
from services.compose.project import TLS_GID, Project, one_host, per_host, project_name
from services.topology import Topology, TopologyError

PROJECT_ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = PROJECT_ROOT / "compose"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m services.compose", description=__doc__.split("\n")[0])
    parser.add_argument("topology", help="a topology file (topologies/*.toml)")
    parser.add_argument("--per-region", action="store_true", help="one project per host (separate machines)")
    parser.add_argument(
        "--host", action="append", default=[], metavar="NODE=ADDRESS",
        help="a region's or serializer's address (its machine); nodes with one address share a project",
    )  # fmt: skip
    parser.add_argument("--no-web", action="store_true", help="only the store's services, not Chirp")
    parser.add_argument(
        "--real-wan", action="store_true", help="no emulated latencies: the machines are really apart"
    )
    parser.add_argument(
        "--no-tls", action="store_true",
        help="plaintext between containers and hosts (the topology says insecure = true); default: TLS",
    )  # fmt: skip
    parser.add_argument("--out", help="directory (default compose/<name> or compose/<name>-per-region)")
    return parser.parse_args(argv)


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", "-m", "services.compose", *argv])


def generate(argv: list[str]) -> dict[Path, str]:
    """Every file the command writes (path → text), ``.env`` and certificates aside. Raises
    TopologyError."""
    return planned(argv)[0]


def planned(argv: list[str]) -> tuple[dict[Path, str], list[tuple[Path, Project]]]:
    """The files, and each project with the directory it goes to."""
    args = parse_args(argv)
    topology = Topology.load(args.topology)
    hosts = dict(_pair(item) for item in args.host)
    web, wan, tls = not args.no_web, not args.real_wan, not args.no_tls
    header = HEADER + command_line(argv) + "\n"
    files: dict[Path, str] = {}
    projects: list[tuple[Path, Project]] = []
    if args.per_region:
        root = Path(args.out) if args.out else COMPOSE_DIR / f"{topology.name}-per-region"
        for project in per_host(topology, hosts, web=web, emulate_wan=wan, tls=tls):
            prefix = f"{project_name(topology.name)}-"
            projects.append((root / project.name.removeprefix(prefix), project))
    else:
        if hosts:
            raise TopologyError("--host is for --per-region projects (one host names every node itself)")
        root = Path(args.out) if args.out else COMPOSE_DIR / topology.name
        project, client = one_host(topology, web=web, emulate_wan=wan, tls=tls)
        projects.append((root, project))
        files[root / "client" / "topology.json"] = topology_json(client)
    for directory, project in projects:
        files |= _project_files(directory, project, header)
    return files, projects


def make_certificates(projects: list[tuple[Path, Project]]) -> list[Path]:
    """Each project's TLS directory (``tls/`` beside its ``.env``, mounted read-only into its
    containers): its nodes' certificates and the clients', and the CA's certificate. The CA's
    key stays in the first project's ``ca/`` (0700), in no container and on no other host. Keys
    in ``tls/`` are readable by the owner's group, which compose gives the containers' user
    (``TLS_GID``). Made where missing, kept where valid (``python -m services.certs``)."""
    secured = [(directory, project) for directory, project in projects if project.tls]
    if not secured:
        return []
    ca_dir = secured[0][0] / "ca"
    certs.ensure(ca_dir, secured[0][1].topology.name, [])
    authority = certs.Authority.load(ca_dir)
    made = []
    for directory, project in secured:
        nodes = {*project.nodes, tls.CLIENT_IDENTITY}
        identities = [i for i in certs.identities_of(project.topology) if i.name in nodes]
        certs.ensure(
            directory / "tls", project.topology.name, identities, authority=authority, group_readable=True
        )
        made.append(directory / "tls")
    return made


def _pair(item: str) -> tuple[str, str]:
    node, sep, address = item.partition("=")
    if not sep or not node or not address:
        raise TopologyError(f"--host {item!r}: expected NODE=ADDRESS")
    return node, address


def _project_files(root: Path, project: Project, header: str) -> dict[Path, str]:
    text = dump(project.compose())
    example = "".join(f"{k}={v}\n" for k, v in project.variables.items())
    return {
        root / "compose.yaml": header + text,
        root / "topology.json": topology_json(project.topology),
        root / ".env.example": "# Copy to .env and fill in the secrets (the same on every host).\n" + example,
    }


def _env(example: str, secrets_made: dict[str, str]) -> str:
    """The example with a fresh secret for each empty variable: the same for every project of
    one run (the hosts of one deployment share its secrets); ``TLS_GID``, the group that may
    read the certificates' keys, is this user's."""
    lines = []
    for line in example.splitlines():
        name, sep, value = line.partition("=")
        if name == TLS_GID:
            value = str(os.getgid())
        elif sep and not value and not name.startswith("#"):
            value = secrets_made.setdefault(name, secrets.token_urlsafe(32))
        lines.append(f"{name}{sep}{value}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["reconfigure"]:
        return reconfigure.main(argv[1:])
    try:
        files, projects = planned(argv)
    except TopologyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    secrets_made: dict[str, str] = {}
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
        env = path.with_name(".env")
        if path.name == ".env.example" and not env.exists():
            env.touch(mode=0o600)
            env.write_text(_env(text, secrets_made))
            print(f"wrote {env} (fresh secrets; keep it out of version control)")
    for tls_dir in make_certificates(projects):
        print(f"certificates in {tls_dir} (host clients: SATURN_TLS_DIR={tls_dir.resolve()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
