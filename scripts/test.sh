#!/usr/bin/env bash
# One command: set up, lint, and run the whole test suite (real Redis, real gRPC processes).
# Extra arguments go to pytest, e.g. `scripts/test.sh -k crash -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
