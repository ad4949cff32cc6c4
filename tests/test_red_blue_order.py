"""Red and blue stay causally ordered (RedBlue, §4): a strong (red) operation's value keeps its
writer's causal past, and a session that reads it sees the causal (blue) writes its writer made
before it. The sequence that breaks it: a blue write x at A whose payload is held back on its way
to C (C's remote proxy is down for a while), then a strong write at A naming x; a reader at C
gets the name in a few milliseconds (the register's timestamp from C and B, its value from A),
and then looks for x. Under a causal protocol the read waits until x is there; under
``eventual`` the reader finds the name and no x."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.causality import visible
from helpers.topologies import load_topology
from helpers.waiting import unique

from causal_client import CausalClient, InsertIfAbsent
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster

NS = "redblue"
HELD_S = 1.0  # how long x's payload is held back from C (a hold that sets the arrival order)


@pytest.fixture(scope="module", params=["saturn", "saturn+token", "eventual"])
def cluster(request, tmp_path_factory):
    """Red operations by Vivace's registers, or by Gemini's token (its regions hold it 100 ms each)."""
    protocol, _, mode = request.param.partition("+")
    strong = {"mode": mode, "token_hold_ms": 100} if mode else {}
    topology = load_topology("causality-3region.toml", protocol=protocol, strong=strong)
    with Cluster(topology, tmp_path_factory.mktemp(request.param.replace("+", "-"))) as running:
        yield running


def hold_back_payloads_to_c(cluster) -> threading.Thread:
    cluster.kill("c.bulk-receiver")
    back = threading.Thread(target=lambda: (time.sleep(HELD_S), cluster.restart("c.bulk-receiver")))
    back.start()
    return back


@pytest.mark.parametrize("red", ["write", "execute"])
def test_a_red_value_is_read_with_the_blue_writes_before_it(cluster, red):
    address = cluster.topology.client_address("a")
    with (
        CausalClient.connect(address, site="A") as at_a,
        CausalClient.connect(address, site="C") as at_c,
    ):
        writer, reader = at_a.session("a"), at_c.session("c")
        key, x = unique("pointer"), unique("x")
        reader.strong_read(NS, key)  # connections made
        back = hold_back_payloads_to_c(cluster)
        try:
            writer.write("all", x, {"text": "written before the red operation"})
            if red == "write":
                writer.strong_write(NS, key, x)
                found = reader.strong_read(NS, key)
                assert found.value == x
            else:
                assert writer.execute(NS, key, InsertIfAbsent(x)).applied
                found = reader.execute(NS, key, InsertIfAbsent("late"))  # not applied: reads x
                assert (found.applied, found.value) == (False, x)
            seen = visible(reader, x)
        finally:
            back.join()
    if cluster.topology.protocol == "eventual":
        assert not seen, "the sequence did not break causality under eventual: the test cannot fail"
    else:
        assert seen, f"the red value {x!r} was read at c without the blue write before it"
