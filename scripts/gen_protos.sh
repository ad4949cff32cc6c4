#!/usr/bin/env bash
# Regenerates the gRPC/protobuf Python modules from the .proto files (needs grpcio-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
gen() {
  local dir=$1 name=$2
  "${PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I"$dir" --python_out="$dir" --pyi_out="$dir" \
    --grpc_python_out="$dir" "$dir/$name.proto"
  # protoc emits absolute imports; make them package-relative.
  sed -i -E "s/^import ${name}_pb2 as /from . import ${name}_pb2 as /" "$dir/${name}_pb2_grpc.py"
}
gen causal_client/proto store
gen services/proto bulk
gen services/proto saturn
