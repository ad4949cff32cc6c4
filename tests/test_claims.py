"""Strongly consistent claims: one compare-and-set at the key's owner region, so that of
concurrent claims of one key from different regions exactly one wins (usernames, issue 4)."""

from __future__ import annotations

import threading

import grpc
import pytest
from helpers.waiting import unique

from causal_client import ClaimResult, InvalidRequest, WrongPlace
from causal_client.claims import owner_region
from causal_client.errors import from_rpc_error
from causal_client.proto import store_pb2, store_pb2_grpc

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_owner_region_is_stable_and_spreads_keys():
    regions = ["virginia", "ireland", "frankfurt"]
    owners = {owner_region(regions, "username", f"user{i}") for i in range(60)}
    assert owners == set(regions)
    assert owner_region(regions, "username", "alice") == owner_region(list(regions), "username", "alice")


def test_claim_is_granted_once_and_retry_safe(two_regions, client_for):
    client = client_for(two_regions)
    a, b = client.session("a"), client.session("b")
    key = unique("name")
    assert a.claim("username", key, "holder-1") == ClaimResult(True, "holder-1")
    assert a.claim("username", key, "holder-1").granted  # the same holder retrying
    assert b.claim("username", key, "holder-2") == ClaimResult(False, "holder-1")
    assert not b.release_claim("username", key, "holder-2")  # not its holder
    assert a.release_claim("username", key, "holder-1")
    assert b.claim("username", key, "holder-2") == ClaimResult(True, "holder-2")


def test_concurrent_claims_from_both_regions_have_exactly_one_winner(two_regions, client_for):
    client = client_for(two_regions)

    def claim(region: str, key: str, barrier: threading.Barrier, results: dict[str, ClaimResult]) -> None:
        session = client.session(region)
        barrier.wait()
        results[region] = session.claim("username", key, f"holder-{region}")

    for round_ in range(20):
        key, barrier, results = unique(f"race{round_}"), threading.Barrier(2), {}
        threads = [threading.Thread(target=claim, args=(r, key, barrier, results)) for r in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [r for r, res in results.items() if res.granted]
        assert len(winners) == 1, results
        assert {res.holder for res in results.values()} == {f"holder-{winners[0]}"}


def test_claim_at_a_region_that_does_not_own_the_key_is_refused(two_regions):
    topology = two_regions.topology
    keys = (unique(f"k{i}") for i in range(50))
    key = next(k for k in keys if owner_region(["a", "b"], "username", k) == "b")
    request = store_pb2.ClaimRequest(namespace="username", key=key, holder="h")
    channel = grpc.insecure_channel(topology.frontend_endpoint("a"))
    with channel, pytest.raises(grpc.RpcError) as err:
        store_pb2_grpc.StoreStub(channel).Claim(request, timeout=5)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "decided by region b" in err.value.details()
    assert isinstance(from_rpc_error(err.value), WrongPlace)  # the gears' code survives the gateway


@pytest.mark.parametrize(
    ("namespace", "key", "holder", "message"),
    [("", "k", "h", "namespace must not be empty"), ("username", "a\nb", "h", "printable"),
     ("username", "k", "", "holder must not be empty"), ("username", "x" * 201, "h", "1-200")],
)  # fmt: skip
def test_bad_claims_get_invalid_argument(two_regions, client_for, namespace, key, holder, message):
    session = client_for(two_regions).session("a")
    with pytest.raises(InvalidRequest, match=message):
        session.claim(namespace, key, holder)
