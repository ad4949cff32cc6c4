"""Red operations ordered by a token, Gemini's way (`[strong] mode = "token"`,
causal_client/token.py, services/region/lua/red.lua), on a real three-region cluster whose
regions hold the token 150 ms each in turn: a value written anywhere is read everywhere; of
concurrent insert-if-absent from every region exactly one wins; random concurrent histories from
every region are linearizable; a region down stops red operations (the token cannot pass: they
name it) and they go on once it is back; a region that held no token for a while catches up."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.strong_histories import assert_linearizable_history
from helpers.topologies import load_topology
from helpers.waiting import unique

from causal_client import CausalClient, CompareAndSet, InsertIfAbsent, NoQuorum
from causal_client.token import TokenRegisters
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster

NS = "token-test"
HOLD_MS = 150


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    topology = load_topology(
        "causality-3region.toml", protocol="saturn", strong={"mode": "token", "token_hold_ms": HOLD_MS}
    )
    with Cluster(topology, tmp_path_factory.mktemp("token")) as cluster:
        yield cluster


def client_at(cluster, site: str, timeout: float = 5.0) -> CausalClient:
    return CausalClient.connect(cluster.topology.client_address("a"), site=site, timeout=timeout)


def test_the_client_runs_the_deployments_mode(three):
    with client_at(three, "A") as client:
        assert isinstance(client.strong, TokenRegisters) and client.strong.hold_s == HOLD_MS / 1000


def test_a_value_written_anywhere_is_read_everywhere_in_one_order(three):
    key = unique("k")
    with client_at(three, "A") as at_a, client_at(three, "C") as at_c:
        a, c = at_a.session("a"), at_c.session("c")
        assert c.strong_read(NS, key).value is None
        first = a.strong_write(NS, key, "one")
        assert c.strong_read(NS, key).value == "one"
        second = c.strong_write(NS, key, "two")
        assert second > first  # red operations are numbered in one order
        assert a.execute(NS, key, CompareAndSet("two", "three")).applied
        assert c.strong_read(NS, key).value == "three"


def claim_at_once(clients: list[CausalClient], key: str) -> dict:
    """Every region's insert-if-absent of its own name for ``key``, at the same moment."""
    results, start = {}, threading.Barrier(len(clients))

    def claim(client: CausalClient, region: str) -> None:
        start.wait()
        results[region] = client.session(region).execute(NS, key, InsertIfAbsent(region))

    threads = [threading.Thread(target=claim, args=(c, r)) for c, r in zip(clients, "abc", strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_of_concurrent_claims_from_every_region_exactly_one_wins(three):
    clients = [client_at(three, site) for site in "ABC"]
    try:
        for _ in range(3):
            results = claim_at_once(clients, unique("name"))
            winners = [r for r, x in results.items() if x.applied]
            assert len(winners) == 1 and {x.value for x in results.values()} == set(winners), results
    finally:
        for client in clients:
            client.close()


def test_random_concurrent_histories_from_every_region_are_linearizable(three):
    clients = [client_at(three, site) for site in "ABC"]
    assert_linearizable_history(clients, "abc", NS, seconds=4.0, at_least=50)


def test_a_region_down_stops_red_operations_which_name_it(three):
    key = unique("k")
    with client_at(three, "A", timeout=1.0) as client:
        s = client.session("a")
        s.strong_write(NS, key, "before")
        three.kill("c.redis0")
        try:
            with pytest.raises(NoQuorum) as refused:
                for _ in range(len("abc") + 1):  # at most until the token must pass to a
                    s.strong_write(NS, key, "while c is down")
                    time.sleep(HOLD_MS / 1000)  # a hold (a fixed time): the token moves on
            assert refused.value.missing == ("c",) and "token" in str(refused.value)
        finally:
            three.restart("c.redis0")
        s.strong_write(NS, key, "after")
        assert client.session("c").strong_read(NS, key).value == "after"
