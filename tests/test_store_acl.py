"""The stores' client user: with the deployment's secret set, a client logs in to a region's
stores as ``client`` (its password derived from the secret) and may call a client's gears
through the gateway module, and nothing else that touches data. Each refusal below is Redis's
own (ACL) or the module's; the same calls as the services' user succeed, so the refusals are the
user's, not the commands'."""

from __future__ import annotations

import pytest
import redis
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import AccessDenied, CausalClient, Mutation, wire
from causal_client.credentials import CLIENT_USER, client_password
from causal_client.label import Label
from causal_client.transactions import write_args
from services import auth
from services.launcher.cluster import Cluster
from services.region import gears

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

SECRET = "acl-test-secret"
SHARD = wire.shard_tag(0)  # the one key a gear call names

FORBIDDEN = {
    "a key command": ["HSET", "d:all:x", "c", "1|a/0|v|forged"],
    "a read of a data key": ["HGETALL", "d:all:x"],
    "a script": ["EVAL", "return redis.call('FLUSHALL')", "0"],
    "a gear without the module": ["FCALL", wire.WRITE, "0", "1"],
    "loading a library": ["FUNCTION", "LOAD", "#!lua name=evil\nredis.register_function('x', print)"],
    "deleting the gears": ["FUNCTION", "DELETE", gears.LIBRARY],
    "flushing": ["FLUSHALL"],
    "configuration": ["CONFIG", "GET", "requirepass"],
    "listing keys": ["KEYS", "*"],
    "appending to the bulk stream": ["XADD", gears.shard_key(gears.BULK_STREAM, SHARD), "*", "g", "all"],
    "reading the bulk stream": ["XREAD", "STREAMS", gears.shard_key(gears.BULK_STREAM, SHARD), "0"],
    "a gear naming a data key as its shard": ["SATURN.CALL", wire.WRITE, "1", "d:all:x"],
    "a gear without its shard (its first argument taken as the key)": ["SATURN.CALL", wire.WRITE, "0", "1"],
    "pub/sub": ["PUBLISH", "any-channel", "1"],
}
REFUSED_BY_THE_MODULE = {  # allowed commands, refused arguments
    "a services' gear": ["SATURN.CALL", "saturn_apply", "1", SHARD, "a/0", "a", "0", "0"],
    "a services' gear, read-only door": ["SATURN.READ", "saturn_heartbeat", "1", SHARD],
    "the proxy's label marking": ["SATURN.CALL", "saturn_outside_order", "1", SHARD, "0"],
    "a gear naming two keys": ["SATURN.CALL", wire.WRITE, "2", SHARD, "{s1}", "1"],
    "a key that is no shard's tag": ["SATURN.CALL", wire.WRITE, "1", "{s0", "1"],
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Cluster:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(auth.SECRET_ENV, SECRET)
        topology = load_topology("two-region.toml", protocol="saturn")
        cluster = Cluster(topology, tmp_path_factory.mktemp("acl"))
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()


def as_client(cluster: Cluster) -> redis.Redis:
    t = cluster.topology
    password = client_password(SECRET)
    return redis.Redis(host=t.host, port=t.redis_port("a"), username=CLIENT_USER, password=password)


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_the_client_user_is_refused_everything_but_the_gears(secured, what):
    with as_client(secured) as store, pytest.raises(redis.exceptions.NoPermissionError):
        store.execute_command(*FORBIDDEN[what])


@pytest.mark.parametrize("what", sorted(REFUSED_BY_THE_MODULE))
def test_the_module_runs_a_clients_gears_only(secured, what):
    with as_client(secured) as store, pytest.raises(redis.ResponseError, match=r"^INVALID"):
        store.execute_command(*REFUSED_BY_THE_MODULE[what])


def test_the_module_cannot_be_called_from_a_script(secured):
    """Redis would abort if a function were started while a script runs."""
    t = secured.topology
    with redis.Redis(host=t.host, port=t.redis_port("a"), password=SECRET) as store:
        with pytest.raises(redis.ResponseError, match="script"):
            store.eval("return redis.call('SATURN.READ', 'saturn_version', '1', KEYS[1])", 1, SHARD)
        assert store.ping()


def test_the_client_user_calls_the_gears_and_waits_on_the_watermark_events(secured):
    with as_client(secured) as store:
        assert store.ping()
        assert store.execute_command("SATURN.READ", "saturn_version", "1", SHARD) == wire.GEARS_API.encode()
        args = write_args(Label.zero(), ["1"], [Mutation("all", unique("acl")).set("c", "v")])
        assert int(store.execute_command("SATURN.CALL", wire.WRITE, "1", SHARD, *args)) > 0
        # Allowed (a refusal raises); a proxy raising watermarks meanwhile (a heartbeat) may add one.
        events_key = gears.shard_key(gears.WATERMARK_EVENTS, SHARD)
        events = store.xread({events_key: "$"}, count=1, block=10)
        assert all(stream == events_key.encode() for stream, _ in events)


def test_the_services_user_may_do_what_the_client_user_may_not(secured):
    t = secured.topology
    with redis.Redis(host=t.host, port=t.redis_port("a"), password=SECRET) as store:
        assert store.execute_command("HSET", "acl:probe", "c", "1") == 1
        assert store.execute_command("FCALL", "saturn_heartbeat", "1", SHARD) > 0


def test_a_client_with_the_secret_works_and_one_with_a_wrong_password_is_refused(secured, monkeypatch):
    t = secured.topology
    with CausalClient.connect(t.client_address("a"), secret=SECRET) as client:
        row = unique("acl-client")
        label = client.session("a").write("all", row, {"v": "1"})
        eventually(lambda: client.session("b", label=label).read("all", row).text("v") == "1")
    monkeypatch.delenv(auth.SECRET_ENV, raising=False)
    monkeypatch.setenv("SATURN_CLIENT_SECRET", client_password(SECRET))  # the client's own password only
    with CausalClient.connect(t.client_address("b")) as client:
        assert client.session("b").read("all", row).text("v") == "1"
    monkeypatch.setenv("SATURN_CLIENT_SECRET", "wrong")
    with pytest.raises(AccessDenied, match="credentials"):
        CausalClient.connect(t.client_address("b"))
