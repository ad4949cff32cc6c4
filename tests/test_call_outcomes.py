"""What a caller is told when a call to a store fails: ``OutcomeUnknown`` only when the change
may have been made (the call was sent and its reply lost or late), ``RegionUnavailable`` when it
surely was not (the connection could not be made, or the store refused every command while it
loads its data after a restart). A caller (and the checker's linearizability search) must treat
an unknown outcome as possibly applied; telling it "unknown" for a call that never left would
make it keep, re-read and reconcile changes that do not exist. Real Redis servers of their own."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from helpers.deadlines import scaled, wait_for

from causal_client import OutcomeUnknown, RegionUnavailable
from causal_client.direct import call_gear, connect
from services.launcher.redis_binary import find_redis_server

pytestmark = pytest.mark.cluster  # starts Redis servers: `pytest -m 'not cluster'` skips it

KEYS = 20_000  # with a load delay of 100 µs a key, the restarted server loads for about 2 s


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def redis_server(port: int, directory: Path, *options: str) -> Iterator[subprocess.Popen]:
    server = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
         "--save", "", "--appendonly", "no", *options],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: listens(port), 10, "redis-server listening", interval=0.02)
        yield server
    finally:
        server.send_signal(signal.SIGCONT)
        server.kill()
        server.wait(scaled(10))


def listens(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def a_write(store: redis.Redis) -> None:
    """A gear call that changes something (not read-only, not harmless to send twice)."""
    call_gear(store, "saturn_write", 0, ["x"], read_only=False, retry=False, where=lambda: "the store")


def test_a_store_where_nothing_listens_made_no_change():
    store = connect(f"127.0.0.1:{free_port()}", None, timeout=1.0)
    with pytest.raises(RegionUnavailable, match="Connection refused") as told:
        a_write(store)
    assert not isinstance(told.value, OutcomeUnknown)


def test_a_store_loading_its_data_made_no_change(tmp_path):
    port = free_port()
    with redis_server(port, tmp_path, "--enable-debug-command", "yes"):
        filler = redis.Redis(port=port)
        filler.execute_command("DEBUG", "POPULATE", KEYS)
        filler.save()
        filler.shutdown(nosave=True)
    slow = ("--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024")
    with redis_server(port, tmp_path, *slow):
        store = connect(f"127.0.0.1:{port}", None, timeout=1.0)
        with pytest.raises(redis.exceptions.BusyLoadingError):  # the server is loading, as meant
            store.get("x")
        with pytest.raises(RegionUnavailable, match="loading") as told:
            a_write(store)
        assert not isinstance(told.value, OutcomeUnknown)


def test_a_call_sent_and_never_answered_has_an_unknown_outcome(tmp_path):
    port = free_port()
    with redis_server(port, tmp_path) as server:
        store = connect(f"127.0.0.1:{port}", None, timeout=0.5)
        assert store.ping()  # the connection is made: the call below is sent on it
        server.send_signal(signal.SIGSTOP)
        with pytest.raises(OutcomeUnknown, match="may or may not"):
            a_write(store)
