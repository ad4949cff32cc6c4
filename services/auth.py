"""Credentials of a deployment: one shared secret, ``$SATURN_SECRET``, for everything that talks
inside it (gRPC between regions, clients and frontends, Redis stores and brokers).

On one machine, bound to loopback, a deployment may run without it (the local demo and the tests
do). Once a service listens beyond loopback (a container, another host), it refuses to start
without a secret: nothing that faces a network is open. With the secret set, every gRPC server
refuses calls that do not carry it (``authorization: Bearer <secret>``; health checks excepted,
they reveal nothing), and every Redis requires it as its password.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import urllib.request
from urllib.parse import quote

import grpc

from causal_client import tls
from causal_client.credentials import CLIENT_USER, client_password
from causal_client.errors import SECRET_ENV

HEALTH_PREFIX = "/grpc.health.v1.Health/"


INSECURE_ENV = "SATURN_INSECURE"  # "1": the topology says insecure = true (launcher, compose set it)

log = logging.getLogger("auth")


class CredentialsRequired(RuntimeError):
    """A service would listen beyond loopback without the deployment's secret."""


class TlsRequired(CredentialsRequired):
    """A service would listen beyond loopback without TLS, and the topology does not say
    ``insecure = true``."""


def secret() -> str | None:
    return os.environ.get(SECRET_ENV) or None


def client_user_acl(events_key: str) -> str:
    """The stores' client user (a config line): with its password (derived from the secret,
    causal_client/credentials.py) it may run the gears a client calls, through the gateway
    module, block on the watermark events (an attach's wait), ask a Redis Cluster replica to
    answer reads (READONLY: a client learns the topology while a master is down), and nothing
    else: no key command, no script, no administration, no pub/sub. The one key a gear call
    names is a shard's hash tag ("{...}"), which no stored key is: the user may name those and
    read the events streams (``events_key``, the gears' name for them: this module sits below
    the gears and is told it)."""
    password = client_password(secret() or "")
    return (
        f"user {CLIENT_USER} on >{password} resetkeys resetchannels -@all +saturn.call +saturn.read "
        f"+ping +hello +auth +xread +wait +readonly ~{{* %R~{events_key}{{*"
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a DNS name: it may face a network


def require_for(host: str, what: str, insecure: bool | None = None) -> None:
    """Refuses to listen on ``host`` beyond loopback without a secret, or without TLS unless the
    topology says ``insecure = true`` (``insecure``; None: ``$SATURN_INSECURE``), which is
    logged at every start."""
    if is_loopback(host):
        return
    if secret() is None:
        raise CredentialsRequired(
            f"{what} would listen on {host}, beyond loopback, without credentials: set {SECRET_ENV} "
            f"(the same secret for every service and client of the deployment)"
        )
    if tls.from_env() is not None:
        return
    if insecure if insecure is not None else os.environ.get(INSECURE_ENV) == "1":
        log.warning("%s listens on %s without TLS: the topology says insecure = true", what, host)
        return
    raise TlsRequired(
        f"{what} would listen on {host}, beyond loopback, without TLS: give it the deployment's "
        f"certificates (${tls.TLS_DIR_ENV}; `up --tls` and the compose generator make them), or say "
        "insecure = true in the topology"
    )


def redis_credentials() -> str:
    """What goes before the host in a redis:// URL: ':<password>@', or nothing without a secret."""
    value = secret()
    return f":{quote(value, safe='')}@" if value else ""


def http_headers() -> dict[str, str]:
    """Headers that authenticate a scrape of a region's /metrics (none without a secret)."""
    value = secret()
    return {"Authorization": f"Bearer {value}"} if value else {}


def fetch_metrics(url: str, timeout_s: float) -> str:
    """A region's /metrics page (``Topology.metrics_url``), with the deployment's credentials and,
    for an https URL, its TLS. Raises OSError (urllib's errors among them) if it cannot."""
    context = tls.process_context(server=False) if url.startswith("https:") else None
    request = urllib.request.Request(url, headers=http_headers())
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as reply:
        return reply.read().decode()


def call_metadata(value: str | None = None) -> tuple[tuple[str, str], ...]:
    """Metadata that authenticates a gRPC call (none without a secret)."""
    value = value if value is not None else secret()
    return (("authorization", f"Bearer {value}"),) if value else ()


class SecretInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call (health checks aside) that does not carry the deployment's secret."""

    def __init__(self, value: str):
        self._expected = f"Bearer {value}".encode()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(HEALTH_PREFIX):
            return handler
        presented = dict(handler_call_details.invocation_metadata or ()).get("authorization", "")
        if hmac.compare_digest(presented.encode(), self._expected):
            return handler
        return _denied(handler)


def _denied(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    async def deny(_request, context: grpc.aio.ServicerContext):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong credentials")

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[bool(handler.request_streaming), bool(handler.response_streaming)]
    return make(
        deny,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    value = secret()
    return [SecretInterceptor(value)] if value else []
