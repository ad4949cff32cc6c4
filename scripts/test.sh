#!/usr/bin/env bash
# One command: set up, lint, and run the whole test suite (real Redis, real gRPC processes).
# Extra arguments go to pytest, e.g. `scripts/test.sh -k crash -x`, or `scripts/test.sh -m "not cluster"`
# for the tests that start no process (seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
.venv/bin/ruff check .
.venv/bin/ruff format --check .  # the code as `ruff format` writes it (`# fmt: skip` marks aligned tables)
# The type hints, where [tool.mypy] in pyproject.toml says they are checked. Its cache lives
# outside the checkout, so a fresh clone checks only what changed (mypy compares each file's
# hash): 2 s instead of 40-100.
MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saturn-twissandra/mypy} .venv/bin/mypy
# Two test files at a time (pytest-xdist, a file to a worker, so that a module's cluster starts
# once; the longest files first, a module marked `exclusive` alone: tests/helpers/core_share.py).
# PYTEST_WORKERS=0 runs one file at a time (docs/OPERATIONS.md, "Tests"). --durations: the 20
# slowest tests at the end of every run.
exec .venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder --durations=20 "$@"
