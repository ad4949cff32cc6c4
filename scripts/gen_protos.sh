#!/usr/bin/env bash
# Regenerates the gRPC/protobuf Python modules from the .proto files (needs grpcio-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
# gRPC services (the store's API, for clients): messages and stubs.
gen() {
  local dir=$1 name=$2
  "${PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I"$dir" --python_out="$dir" --pyi_out="$dir" \
    --grpc_python_out="$dir" "$dir/$name.proto"
  # protoc emits absolute imports; make them package-relative.
  sed -i -E "s/^import ${name}_pb2 as /from . import ${name}_pb2 as /" "$dir/${name}_pb2_grpc.py"
}
# Messages only (the bodies of link-transport messages, services/transport).
gen_messages() {
  local dir=$1 name=$2
  "${PYTHON:-.venv/bin/python}" -m grpc_tools.protoc -I"$dir" --python_out="$dir" --pyi_out="$dir" "$dir/$name.proto"
}
gen causal_client/proto store
gen_messages services/proto bulk
gen_messages services/proto saturn
