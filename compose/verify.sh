#!/usr/bin/env bash
# Builds the image and runs the container tests on Docker engines of their own (root, Linux):
# the one-host demo and three "hosts" in network namespaces, checked from a client's side, with
# crashes. Nothing of the host's own network or Docker is touched. See compose/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
exec .venv/bin/python -m pytest -m docker -s -p no:cacheprovider tests/test_compose_docker.py "$@"
