"""A client pointed at the wrong kind of port says what answered there and what to pass instead:
``CausalClient.connect`` given a gRPC port (a region's gateway), a web app's port or a link port,
and ``CausalClient.connect_gateway`` given a store's (Redis) or a web app's port, raise
``WrongPort``; a port where nothing listens stays ``RegionUnavailable``. Real servers of
each kind, in this process (a gRPC server, an HTTP server) or a stand-in that greets as a link
port does."""

from __future__ import annotations

import http.server
import socket
import socketserver
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import grpc
import pytest

from causal_client import CausalClient, InvalidRequest, RegionUnavailable
from causal_client.errors import WrongPort
from services.transport.handshake import MAGIC


@contextmanager
def grpc_port() -> Iterator[int]:
    server = grpc.server(ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


@contextmanager
def serving(handler: type[socketserver.BaseRequestHandler]) -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


class RedisLike(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while self.request.recv(1024):
            self.request.sendall(b"-NOAUTH Authentication required.\r\n")


class Greeter(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(MAGIC + b"\0" * 16)
        self.request.recv(64)


@contextmanager
def web_port() -> Iterator[int]:
    with serving(http.server.SimpleHTTPRequestHandler) as port:
        yield port


@contextmanager
def link_port() -> Iterator[int]:
    with serving(Greeter) as port:
        yield port


@pytest.mark.parametrize(
    ("server", "found"),
    [(grpc_port, "HTTP/2: a gRPC port"), (web_port, "HTTP/1: a web"), (link_port, "the link transport")],
    ids=["grpc gateway", "web app", "link port"],
)
def test_connecting_to_another_kind_of_port_names_it(server, found):
    with server() as port, pytest.raises(WrongPort, match=found) as refused:
        CausalClient.connect(f"127.0.0.1:{port}", timeout=2.0)
    assert "is not a region's store" in str(refused.value) and "connect_gateway" in str(refused.value)


def test_a_port_where_nothing_listens_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RegionUnavailable):
        CausalClient.connect(f"127.0.0.1:{port}", timeout=2.0)


def test_several_stores_are_tried_until_one_answers():
    """Given several stores (a cluster region's nodes, one of them down), ``connect`` asks the
    next where nothing listens, and stops at the first that answers, even wrongly."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    with web_port() as port:
        for addresses in ([dead, f"127.0.0.1:{port}"], [f"127.0.0.1:{port}", dead]):
            with pytest.raises(WrongPort, match="HTTP/1: a web"):
                CausalClient.connect(addresses, timeout=2.0)
    with pytest.raises(RegionUnavailable):
        CausalClient.connect([dead, dead], timeout=2.0)
    with pytest.raises(InvalidRequest, match="no store address"):
        CausalClient.connect([], timeout=2.0)


@pytest.mark.parametrize(
    ("handler", "found"),
    [(RedisLike, "RESP: a Redis port"), (http.server.SimpleHTTPRequestHandler, "HTTP/1: a web")],
    ids=["store", "web app"],
)
def test_a_gateway_client_given_another_kind_of_port_names_it(handler, found):
    with serving(handler) as port, pytest.raises(WrongPort, match=found) as refused:
        CausalClient.connect_gateway(f"127.0.0.1:{port}", timeout=2.0)
    assert "is not a region's gateway" in str(refused.value) and "CausalClient.connect" in str(refused.value)
