"""Is a process up? The checks the launcher waits on and every container's HEALTHCHECK runs.

Cheap on purpose: Docker runs a container's check every few seconds, each in a new Python, so
this module imports nothing heavy until it needs it (gRPC only for a gRPC check). As a command:
``python -m services.probes redis PORT | grpc PORT [SERVICE] | link PORT [SERVICE] | http PORT PATH``
(on 127.0.0.1, the secret from ``$SATURN_SECRET``); exit status 0 when healthy. ``link``: the
link transport's port of a bulk receiver or a serializer (services/transport).
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import urllib.request

SECRET_ENV = "SATURN_SECRET"  # causal_client.errors.SECRET_ENV, not imported: it pulls in gRPC
#: the health service a bulk receiver reports SERVING once its protocol is settled (Saturn: the
#: remote proxy follows the tree's order, caught up); regions are ready when it is
READY_HEALTH = "proxy"


def tls_context() -> ssl.SSLContext | None:
    """This process's TLS client context (causal_client/tls.py), None without TLS."""
    from causal_client.tls import process_context  # the standard library only: fast to import

    return process_context(server=False)


def redis_ping(host: str, port: int | None, password: str | None = None) -> bool:
    """PING (after AUTH with the password, if any) answers PONG: up, and its data loaded."""
    try:
        context = tls_context()
        with socket.create_connection((host, port), timeout=0.5) as raw:
            sock = raw if context is None else context.wrap_socket(raw, server_hostname=host)
            if password:
                secret = password.encode()
                sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(secret), secret))
                if not sock.recv(64).startswith(b"+OK"):
                    return False
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def http_ok(url: str) -> bool:
    try:
        context = tls_context() if url.startswith("https:") else None
        with urllib.request.urlopen(url, timeout=2, context=context) as reply:
            return reply.status == 200
    except (OSError, ValueError):
        return False


def grpc_serving(endpoint: str, service: str = "") -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from causal_client.tls import grpc_channel

    try:
        with grpc_channel(endpoint) as channel:
            request = health_pb2.HealthCheckRequest(service=service)
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=0.5)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def link_serving(endpoint: str, service: str = "") -> bool:
    from services.transport.probe import health

    return health(endpoint, service, os.environ.get(SECRET_ENV) or None)


def main(argv: list[str]) -> int:
    kind, port, *rest = argv
    if kind == "redis":
        healthy = redis_ping("127.0.0.1", int(port), os.environ.get(SECRET_ENV) or None)
    elif kind == "grpc":
        healthy = grpc_serving(f"127.0.0.1:{port}", *rest[:1])
    elif kind == "link":
        healthy = link_serving(f"127.0.0.1:{port}", *rest[:1])
    elif kind == "http":
        from causal_client.tls import http_scheme

        healthy = http_ok(f"{http_scheme()}://127.0.0.1:{port}{rest[0] if rest else '/'}")
    else:
        print(f"unknown check {kind!r}: redis, grpc, link or http", file=sys.stderr)
        return 2
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
