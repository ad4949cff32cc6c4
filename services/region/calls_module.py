"""The stores' gateway module (``module/saturn_calls.c``): built from source with the machine's C
compiler the first time a store needs it, cached by the source's digest.

Redis runs a function's commands with its caller's permissions, so a client user that may run
nothing but the gears could not run them at all; the module's ``SATURN.CALL`` / ``SATURN.READ``
run a client's gears as the server, and a client user gets those two commands and no other that
touches data (services/auth.py, ``store_config``). Containers get the module built into the
image (compose/build.sh) and name it with ``$SATURN_REDIS_MODULE``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("module") / "saturn_calls.c"
MODULE_ENV = "SATURN_REDIS_MODULE"  # a module built elsewhere (the image's)


class ModuleUnavailable(RuntimeError):
    """The module cannot be built here: says what to install."""


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "saturn-twissandra"


def module_path() -> Path:
    """The built module for the current source (building it if needed)."""
    if os.environ.get(MODULE_ENV):
        return Path(os.environ[MODULE_ENV])
    digest = hashlib.sha1(SOURCE.read_bytes()).hexdigest()[:12]
    target = cache_dir() / f"saturn_calls-{digest}.so"
    if not target.exists():
        build(target)
    return target


def build(target: Path) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise ModuleUnavailable(
            "the stores need the gateway module built from services/region/module/saturn_calls.c, and "
            "there is no C compiler here: install one (Debian: apt-get install gcc libc6-dev)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / target.name
        done = subprocess.run(
            [compiler, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(built), str(SOURCE)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ModuleUnavailable(f"building the stores' gateway module failed:\n{done.stderr[-2000:]}")
        built.replace(target)  # atomic: a concurrent build finds a whole file or none
