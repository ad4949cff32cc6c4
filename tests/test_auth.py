"""Credentials: nothing listens beyond loopback without the deployment's secret, and with the
secret set every gRPC server, link port, metrics endpoint and Redis of the deployment wants it,
while the deployment itself (replication, the tree, clients given the secret) works as before."""

from __future__ import annotations

import asyncio
import logging
import os
import urllib.error
import urllib.request

import pytest
import redis
from helpers.deadlines import scaled
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import AccessDenied, CausalClient, tls
from services import auth, certs
from services.labelpath.links import TREE
from services.launcher.cluster import Cluster, LaunchError
from services.proto import saturn_pb2
from services.transport.client import open_link
from services.transport.errors import LinkRefused
from services.transport.probe import health

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

SECRET = 's3cret with spaces & "symbols":/@\\'  # quoted for Redis's config file, escaped in URLs


@pytest.mark.parametrize(
    ("host", "needs"),
    [("127.0.0.1", False), ("127.0.0.2", False), ("::1", False), ("localhost", False),
     ("0.0.0.0", True), ("10.0.0.7", True), ("virginia", True)],
)  # fmt: skip
def test_listening_beyond_loopback_needs_a_secret_and_tls(monkeypatch, host, needs, tmp_path, caplog):
    monkeypatch.delenv(auth.SECRET_ENV, raising=False)
    monkeypatch.delenv(tls.TLS_DIR_ENV, raising=False)
    monkeypatch.delenv(auth.INSECURE_ENV, raising=False)
    if needs:
        with pytest.raises(auth.CredentialsRequired, match="beyond loopback, without credentials"):
            auth.require_for(host, "x")
        monkeypatch.setenv(auth.SECRET_ENV, SECRET)
        with pytest.raises(auth.TlsRequired, match="beyond loopback, without TLS"):
            auth.require_for(host, "x")
        with caplog.at_level(logging.WARNING, logger="auth"):
            auth.require_for(host, "x", insecure=True)  # said in so many words: logged
        assert "insecure = true" in caplog.text
        monkeypatch.setenv(auth.INSECURE_ENV, "1")
        auth.require_for(host, "x")
        monkeypatch.delenv(auth.INSECURE_ENV)
        certs.ensure(tmp_path / "tls", "t", [certs.Identity("client")])
        monkeypatch.setenv(tls.TLS_DIR_ENV, str(tmp_path / "tls"))
    auth.require_for(host, "x")


def test_the_launcher_refuses_an_open_deployment_without_a_secret(tmp_path, monkeypatch):
    monkeypatch.delenv(auth.SECRET_ENV, raising=False)
    topology = load_topology("two-region.toml", bind="0.0.0.0")
    refused = r"0\.0\.0\.0, beyond loopback, without credentials: set SATURN_SECRET"
    with pytest.raises(LaunchError, match=refused):
        Cluster(topology, tmp_path).start()


def test_with_a_secret_everything_wants_it(launch, monkeypatch):
    monkeypatch.setenv(auth.SECRET_ENV, SECRET)
    cluster: Cluster = launch("two-region.toml", protocol="saturn")
    t = cluster.topology
    with CausalClient.connect(t.client_address("a"), secret=SECRET) as client:
        row = unique("authed")
        label = client.session("a").write("all", row, {"v": "1"})  # replicates over authenticated
        eventually(
            lambda: client.session("b", label=label).read("all", row).text("v") == "1",
            what="the write at b, over authenticated links",
        )
    for wrong in ("", "guess"):
        with pytest.raises(AccessDenied, match="credentials"):
            CausalClient.connect(t.client_address("a"), secret=wrong)
    with redis.Redis(host=t.host, port=t.redis_port("a")) as store, pytest.raises(redis.AuthenticationError):
        store.ping()
    with redis.Redis(host=t.host, port=t.redis_port("a"), password=SECRET) as store:
        assert store.ping()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(t.metrics_url("a"), timeout=scaled(5))
    assert refused.value.code == 401
    forged = saturn_pb2.Hello(node="s").SerializeToString()  # a forged tree neighbour
    for wrong in ("", "guess"):
        monkeypatch.setenv(auth.SECRET_ENV, wrong)
        with pytest.raises(LinkRefused, match="missing or wrong credentials"):
            asyncio.run(open_link(t.bulk_endpoint("b"), TREE, forged))
        assert not health(t.bulk_endpoint("b"), secret=wrong)  # a link port's health wants it too
    assert health(t.bulk_endpoint("b"), secret=SECRET)


def test_the_health_probes_read_the_same_secret_variable():
    """services/probes.py names the variable itself (importing the client would cost every
    container health check the gRPC import); it must stay the client's."""
    from causal_client.errors import SECRET_ENV
    from services import probes

    assert probes.SECRET_ENV == SECRET_ENV


def test_the_launcher_refuses_an_open_deployment_without_tls_unless_it_says_insecure(tmp_path, monkeypatch):
    monkeypatch.setenv(auth.SECRET_ENV, SECRET)
    monkeypatch.delenv(tls.TLS_DIR_ENV, raising=False)
    monkeypatch.delenv(auth.INSECURE_ENV, raising=False)
    with pytest.raises(LaunchError, match=r"beyond loopback, without TLS.*insecure = true"):
        Cluster(load_topology("two-region.toml", bind="0.0.0.0"), tmp_path / "a").start()
    assert tls.TLS_DIR_ENV not in os.environ  # nothing of the failed start is left
