#!/usr/bin/env bash
# One command: set up, then run the three-region demo until Ctrl-C.
# Extra arguments go to the launcher, e.g. `scripts/demo.sh --base-port 8200`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
exec .venv/bin/python -m services.launcher up "${TOPOLOGY:-topologies/demo-3region.toml}" --web "$@"
