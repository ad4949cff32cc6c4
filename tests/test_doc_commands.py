"""The README and docs/ say only what exists: every command they show names a module (and
subcommand) that answers ``--help``, a few quick ones run for real, and every link between the
pages resolves inside the repository, anchors included.

Commands are the lines of fenced code blocks that start (after ``VAR=value`` assignments) with
``python -m``, ``.venv/bin/python -m`` or ``bash scripts/``; a line joined to the next by ``\\``
is one command, and ``&&`` or ``;`` separate commands on one line. For ``python -m MODULE A B
...`` the subcommand path is the leading words that look like subcommands (lower case, no ``/``
or ``.``): ``python -m loadtest bench fig4 --quick`` is checked as ``python -m loadtest bench fig4
--help``; a placeholder (``NAME``, ``FIG``, ``<x>``) ends the path, so ``python -m loadtest bench
NAME`` checks ``python -m loadtest bench --help``. A ``bash scripts/X`` command is checked by
its script existing (running one sets up the machine).

The ``--help`` calls of one module run in one interpreter, one after another, each exactly as
``python -m`` runs a module (``runpy.run_module(..., run_name="__main__", alter_sys=True)`` with
``sys.argv`` set, its exit status read from ``SystemExit``): starting an interpreter and
importing the module's dependencies were nearly all of a call's time.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
PYTHON = re.compile(r"^(?:\.venv/bin/)?python3?$")
SUBCOMMAND = re.compile(r"^[a-z][a-z0-9_-]*$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
SEPARATORS = {"&&", "||", ";", "|"}
TIMEOUT_S = 300  # one module's --help calls, or one quick command
# Runs each argv of a JSON list as `python -m` would, in this one interpreter; prints the statuses.
HELP_RUNNER = """
import contextlib, io, json, runpy, sys, traceback
statuses = []
for argv in json.load(sys.stdin):
    out = io.StringIO()
    sys.argv = [argv[0], *argv[1:]]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as exc:
            code = exc.code
            status = 0 if code is None else code if isinstance(code, int) else 1
        except BaseException:
            traceback.print_exc()
            status = 1
    statuses.append([status, out.getvalue()[-2000:]])
print("\\n" + json.dumps(statuses))
"""


@dataclass(frozen=True)
class Command:
    doc: str  # the page it is on, relative to the repository
    line: int
    text: str  # as written
    argv: tuple[str, ...]  # without the assignments before it

    @property
    def module(self) -> str | None:
        """The ``-m`` module of a Python command, None for a bash script."""
        return self.argv[2] if PYTHON.match(self.argv[0]) else None

    @property
    def arguments(self) -> tuple[str, ...]:
        return self.argv[3:]

    @property
    def path(self) -> tuple[str, ...]:
        """The subcommands named after the module, as far as they look like subcommands."""
        found: list[str] = []
        for word in self.arguments:
            if not SUBCOMMAND.match(word):
                break
            found.append(word)
        return tuple(found)

    @property
    def help_argv(self) -> tuple[str, ...]:
        return (sys.executable, "-m", str(self.module), *self.path, "--help")

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def fenced_lines(text: str) -> list[tuple[int, str]]:
    """The lines inside fenced code blocks (numbered from 1), continuations joined."""
    lines: list[tuple[int, str]] = []
    inside = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        if pending is not None:
            number, line = pending[0], f"{pending[1]} {line.strip()}"
            pending = None
        if line.rstrip().endswith("\\"):
            pending = (number, line.rstrip()[:-1])
            continue
        lines.append((number, line.strip()))
    return lines


def is_command(words: list[str]) -> bool:
    if len(words) >= 3 and PYTHON.match(words[0]) and words[1] == "-m":
        return True
    return len(words) >= 2 and words[0] == "bash" and words[1].startswith("scripts/")


def commands_in(path: Path) -> list[Command]:
    found = []
    for number, line in fenced_lines(path.read_text()):
        start = re.sub(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*", "", line)
        if not re.match(r"(?:\.venv/bin/)?python3? -m |bash scripts/", start):
            continue  # prose, code, output, or a command of another kind (cd, docker, locust)
        words = shlex.split(line, comments=True)
        part: list[str] = []
        for word in [*words, ";"]:
            if word not in SEPARATORS:
                part.append(word)
                continue
            while part and ASSIGNMENT.match(part[0]):
                part.pop(0)
            if is_command(part):
                found.append(Command(str(path.relative_to(ROOT)), number, line, tuple(part)))
            part = []
    return found


@cache
def all_commands() -> tuple[Command, ...]:
    return tuple(c for doc in DOCS for c in commands_in(doc))


def python_commands() -> list[Command]:
    return [c for c in all_commands() if c.module]


def help_targets() -> dict[tuple[str, ...], list[Command]]:
    """Each distinct ``--help`` call, with the commands it stands for."""
    targets: dict[tuple[str, ...], list[Command]] = {}
    for command in python_commands():
        targets.setdefault(command.help_argv, []).append(command)
    return targets


def run(argv: tuple[str, ...] | list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def run_helps(targets: list[tuple[str, ...]]) -> list[tuple[int, str]]:
    """The exit status and output of each ``--help`` call (all of one module), in one interpreter."""
    argvs = [list(t[2:]) for t in targets]  # [module, *subcommands, "--help"]
    result = subprocess.run(
        [sys.executable, "-c", HELP_RUNNER],
        input=json.dumps(argvs),
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    try:
        statuses = json.loads(result.stdout.rstrip().rsplit("\n", 1)[-1])
    except ValueError:  # the interpreter itself died: every call of the module fails with it
        return [(result.returncode or 1, (result.stderr or result.stdout)[-2000:])] * len(targets)
    return [(status, output) for status, output in statuses]


@pytest.fixture(scope="module")
def help_results() -> dict[tuple[str, ...], tuple[int, str]]:
    """Every ``--help`` call: one interpreter per module, the modules side by side."""
    by_module: dict[str, list[tuple[str, ...]]] = {}
    for target in help_targets():
        by_module.setdefault(target[2], []).append(target)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        outcomes = pool.map(run_helps, by_module.values())
        return {
            target: outcome
            for targets, results in zip(by_module.values(), outcomes, strict=True)
            for target, outcome in zip(targets, results, strict=True)
        }


def label(argv: tuple[str, ...]) -> str:
    return " ".join(("python", *argv[1:-1]))


# -- the commands ----------------------------------------------------------------------------
def test_the_docs_show_commands():
    """The extraction works: the README's two commands and the docs' bench commands are found."""
    texts = {" ".join(c.argv) for c in all_commands()}
    assert "bash scripts/demo.sh" in texts and "bash scripts/test.sh" in texts
    assert any(c.module == "loadtest" and c.path[:1] == ("bench",) for c in all_commands())
    assert any(c.module == "services.compose" for c in all_commands())


@pytest.mark.cluster  # starts processes (interpreters only: no cluster)
@pytest.mark.parametrize("argv", list(help_targets()), ids=label)
def test_module_and_subcommand_exist(argv, help_results):
    status, output = help_results[argv]
    where = "\n".join(f"  {c}" for c in help_targets()[argv])
    assert status == 0, f"`{label(argv)} --help` exited {status}; the docs name it at:\n{where}\n{output}"


@pytest.mark.parametrize(
    "command", [c for c in all_commands() if not c.module], ids=lambda c: " ".join(c.argv)
)
def test_scripts_exist(command):
    script = ROOT / command.argv[1]
    assert script.is_file(), f"{command}: no {command.argv[1]}"


def full_runs(tmp: Path) -> list[tuple[Command, list[str]]]:
    """The quick commands that need no cluster, run as written (the generator into ``tmp``)."""
    runs = []
    for n, c in enumerate(python_commands()):
        args = list(c.arguments)
        listing = c.module == "loadtest" and args == ["bench", "--list"]
        if listing or (c.module == "services.tree_report" and args):
            runs.append((c, args))
        elif c.module == "services.compose" and args and args[0].endswith(".toml"):
            if "--out" in args:
                del args[args.index("--out") : args.index("--out") + 2]
            runs.append((c, [*args, "--out", str(tmp / f"project-{n}")]))
    return runs


@pytest.mark.cluster  # starts processes (interpreters only: no cluster)
def test_quick_commands_run(tmp_path):
    runs = full_runs(tmp_path)
    modules = {c.module for c, _ in runs}
    assert {"loadtest", "services.compose"} <= modules, f"the quick commands left the docs: {modules}"
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda r: run([sys.executable, "-m", str(r[0].module), *r[1]]), runs))
    failed = [
        f"{c} (ran: python -m {c.module} {' '.join(args)}) exited {r.returncode}:\n"
        f"{(r.stderr or r.stdout)[-1500:]}"
        for (c, args), r in zip(runs, results, strict=True)
        if r.returncode != 0
    ]
    assert not failed, "\n\n".join(failed)
    for (c, args), r in zip(runs, results, strict=True):
        if c.module == "loadtest":
            assert len(r.stdout.splitlines()) > 3, f"{c}: the list of experiments is empty"
        if c.module == "services.compose":
            project = Path(args[args.index("--out") + 1])
            assert list(project.rglob("compose.yaml")), f"{c}: no compose.yaml written"
            assert "SATURN_SECRET=" in "".join(p.read_text() for p in project.rglob(".env"))


# -- the links -------------------------------------------------------------------------------
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def prose_lines(path: Path) -> list[str]:
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M).splitlines()


def links() -> list[tuple[Path, str]]:
    return [
        (doc, target)
        for doc in DOCS
        for match in LINK.finditer(prose(doc.read_text()))
        for target in match.groups()
        if target and not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


@pytest.mark.parametrize(
    ("doc", "target"), links(), ids=lambda x: x if isinstance(x, str) else x.relative_to(ROOT).as_posix()
)
def test_relative_link_resolves(doc, target):
    file_part, _, anchor = target.partition("#")
    path = (doc.parent / file_part).resolve() if file_part else doc
    where = f"{doc.relative_to(ROOT)}: link {target!r}"
    assert path.is_relative_to(ROOT), f"{where} leaves the repository"
    assert path.exists(), f"{where}: no {path.relative_to(ROOT)}"
    if anchor:
        assert path.suffix == ".md", f"{where}: an anchor into a file that is not a page"
        assert anchor in anchors(path), f"{where}: no heading #{anchor} in {path.relative_to(ROOT)}"


def test_the_bench_list_markers_are_in_place():
    """Another tool writes the table of experiments between these two lines."""
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    start, end = "<!-- bench-list:start -->", "<!-- bench-list:end -->"
    assert text.count(start) == 1 and text.count(end) == 1
    assert text.index(start) < text.index(end)


# -- paths named anywhere ------------------------------------------------------------------------
#: A path into the repository as the tree names them, in a docstring, a comment or a page.
NAMED_PATH = re.compile(
    r"(?<![\w./-])((?:services|causal_client|loadtest|webapp|docs|scripts|tests|compose|topologies|\.ci)"
    r"/[\w./-]*\w/?)"
)
TEXT_SUFFIXES = (".py", ".pyi", ".lua", ".c", ".md", ".toml", ".sh", ".yml", ".yaml", ".html", ".cfg", ".txt")
#: scripts/X, templates/NAME.html, services/x.py: placeholders, not names
PLACEHOLDER = re.compile(r"(?:^|/)(?:[A-Z][A-Z_-]*|[a-z])(?:\.\w+)?/?$")
#: What the project makes and git ignores (.gitignore): compose's build outputs and certificates.
GENERATED = re.compile(r"^compose/(?:\.build/|.+/(?:tls|ca)(?:/|$))")
NOT_SOURCES = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache", ".run"}


def _text_files() -> list[Path]:
    found = []
    for directory, names, files in os.walk(ROOT):
        names[:] = [n for n in names if n not in NOT_SOURCES and not n.endswith(("-results", ".egg-info"))]
        found += [Path(directory) / f for f in files if f.endswith(TEXT_SUFFIXES)]
    return found


def _exists(path: str) -> bool:
    """In the tree, made by the project (GENERATED), or a static file's URL path
    (``{% static 'webapp/chirp.css' %}``)."""
    here = path.rstrip("/")
    return (
        (ROOT / here).exists() or (ROOT / "webapp" / "static" / here).exists() or bool(GENERATED.match(path))
    )


def test_every_path_the_tree_names_exists():
    """A module, script or page named in a docstring, a comment or a document exists: a name
    that outlived what it named sends the next reader nowhere. (docs/MEASUREMENTS.md's dated
    entries name what existed then; a path since moved says where to.)"""
    missing: dict[str, list[str]] = {}
    for file in _text_files():
        try:
            text = file.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        name = str(file.relative_to(ROOT))
        for number, line in enumerate(text.splitlines(), 1):
            for found in NAMED_PATH.finditer(line):
                path = found.group(1)
                if PLACEHOLDER.search(path) or "since moved" in line or _exists(path):
                    continue
                missing.setdefault(path, []).append(f"{name}:{number}")
    lines = [f"  {path} ({', '.join(where[:3])})" for path, where in sorted(missing.items())]
    assert not missing, "named but not there:\n" + "\n".join(lines)
