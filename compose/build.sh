#!/usr/bin/env bash
# Builds the project's image (saturn-twissandra:latest) from compose/Dockerfile.
#
#   compose/build.sh                 # base image from the registry if it can be pulled, else made here
#   compose/build.sh --local-base    # make the base image here from Debian's packages (no registry)
#   compose/build.sh --fresh-base    # the same, not from the one made here in the last week
#   compose/build.sh --relock        # first remake compose/requirements.lock from pyproject.toml
#
# The Python dependencies are downloaded on this machine as wheels for the image's Python
# (CPython 3.11, manylinux) into compose/.build/wheels; the image installs them with
# `pip install --no-index`, so the build itself needs no network. With no registry reachable,
# the base the Dockerfile names (python:3.11-slim-bookworm) is made with debootstrap from the
# Debian mirror apt already uses, and `docker import`ed under that tag (as root: debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '\033[1m[build]\033[0m %s\n' "$*"; }
fail() { echo "compose/build.sh: $*" >&2; exit 1; }

BASE=python:3.11-slim-bookworm
# redis-py needs it below Python 3.11.3 (Debian's 3.11.2, in a locally made base); a freeze on a
# newer Python leaves it out.
ASYNC_TIMEOUT='async-timeout==5.0.1 ; python_full_version < "3.11.3"'
IMAGE=${IMAGE:-saturn-twissandra:latest}
local_base="" relock="" fresh_base=""
for arg in "$@"; do
  case "$arg" in
    --local-base) local_base=1 ;;
    --fresh-base) local_base=1 fresh_base=1 ;;
    --relock) relock=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) fail "unknown option $arg (see --help)" ;;
  esac
done

command -v docker >/dev/null || fail "no docker client: install Docker (or Debian's docker.io) first"
docker info >/dev/null 2>&1 || fail "cannot reach a Docker engine (is dockerd running? DOCKER_HOST=${DOCKER_HOST:-unset})"
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
began=$(date +%s)

if [ -n "$relock" ]; then
  say "remaking compose/requirements.lock"
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  "$PY" -m venv "$tmp/venv" && "$tmp/venv/bin/pip" install -q . >/dev/null
  { echo "# The image's Python dependencies, pinned (compose/build.sh --relock remakes it from pyproject.toml)."
    "$tmp/venv/bin/pip" freeze --exclude saturn-twissandra 2>/dev/null
    echo "$ASYNC_TIMEOUT"; } > compose/requirements.lock
fi

wheels=compose/.build/wheels
if [ ! -f "$wheels/.stamp" ] || [ compose/requirements.lock -nt "$wheels/.stamp" ]; then
  say "downloading wheels for CPython 3.11 into $wheels"
  rm -rf "$wheels" && mkdir -p "$wheels"
  arch=$(uname -m)
  "$PY" -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" --platform "manylinux2014_$arch" \
    --platform any -r compose/requirements.lock -d "$wheels" 2> >(grep -v '^WARNING: Location' >&2) \
    && "$PY" -m pip download -q --no-deps --only-binary=:all: "${ASYNC_TIMEOUT%% ;*}" -d "$wheels" \
      2> >(grep -v '^WARNING: Location' >&2) \
    || fail "could not download the wheels (is PyPI reachable?)"
  touch "$wheels/.stamp"
fi

mirror() {  # the Debian mirror apt uses here
  local uri
  uri=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list \
        | grep -v security | head -1 | awk '{print ($1 == "deb") ? $2 : $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}

PACKAGES=python3,python3-venv,redis-server,ca-certificates
# A base made here is kept (as a tar of its files) for a week, like a pulled image: a Docker
# engine of its own (the container tests) has no image to reuse, and debootstrap takes most of a
# build. Keyed by the mirror and the packages; --fresh-base remakes it.
BASE_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/saturn-twissandra
BASE_MAX_AGE_DAYS=7

make_base() {
  local key tarball
  key=$(printf '%s\n' "$BASE" "$(mirror)" "$PACKAGES" | sha256sum | cut -c1-12)
  tarball=$BASE_CACHE/base-$key.tar
  if [ -n "$fresh_base" ] || [ ! -f "$tarball" ] || [ -n "$(find "$tarball" -mtime +$((BASE_MAX_AGE_DAYS - 1)))" ]; then
    debootstrap_base "$tarball"
  else
    say "making $BASE from the one made here $(( ($(date +%s) - $(stat -c %Y "$tarball")) / 3600 )) h ago ($tarball; remade after $BASE_MAX_AGE_DAYS days, or with --fresh-base)"
  fi
  docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["python3"]' - "$BASE" < "$tarball" >/dev/null
}

debootstrap_base() {  # $1: the tar of the base's files, made anew
  [ "$(id -u)" = 0 ] || fail "making the base image needs root (debootstrap); or pull $BASE"
  command -v debootstrap >/dev/null || { say "installing debootstrap"; apt-get install -y -qq debootstrap >/dev/null; }
  local root; root=$(mktemp -d /var/tmp/saturn-base.XXXXXX)
  say "making $BASE here: debootstrap bookworm from $(mirror) (about a minute)"
  debootstrap --variant=minbase --include="$PACKAGES" \
    bookworm "$root" "$(mirror)" > compose/.build/debootstrap.log 2>&1 \
    || { tail -20 compose/.build/debootstrap.log >&2; rm -rf "$root"; fail "debootstrap failed"; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
         "$root"/usr/share/man/* "$root"/usr/share/locale/*
  mkdir -p "$(dirname "$1")"
  tar -C "$root" -c . > "$1.tmp" && mv "$1.tmp" "$1"
  rm -rf "$root"
}

if [ -n "$local_base" ]; then
  make_base
elif ! docker image inspect "$BASE" >/dev/null 2>&1; then
  say "pulling $BASE"
  docker pull -q "$BASE" >/dev/null 2>&1 || { say "no registry reachable"; make_base; }
fi

# The stores' gateway module (services/region/module), built here and copied into the image: it
# calls only two libc functions, so any glibc of the last decade runs it.
say "building the stores' gateway module"
cc -O2 -Wall -shared -fPIC -o compose/.build/saturn_calls.so services/region/module/saturn_calls.c \
  || fail "could not build the stores' gateway module (install gcc)"

say "building $IMAGE"
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" -f compose/Dockerfile . >/dev/null 2> compose/.build/build.log \
  || { tail -30 compose/.build/build.log >&2; fail "docker build failed (log compose/.build/build.log)"; }
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
say "built $IMAGE: $((size / 1000000)) MB in $(( $(date +%s) - began )) s"
