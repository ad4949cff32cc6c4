"""Causality on congested links: every link of causality-3region at 4 Mbit/s through the relays
(services/wan/), A→C flooded while x is written at A, answered with y at B, and C is watched.
The flood holds x (its payload, and C3's direct label) about a second behind it; y comes the
uncongested way. `eventual` shows y without x; the causal protocols never."""

from __future__ import annotations

import threading

import pytest
from helpers.causality import question_and_answer
from helpers.topologies import load_topology
from helpers.waiting import expect_caught

from causal_client import CausalClient
from loadtest.harness.cluster import with_bandwidth
from services.launcher.cluster import Cluster
from services.wan.flood import flood
from services.wan.routes import flood_endpoint

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

ROUNDS = 3
MBIT = 4.0


@pytest.mark.parametrize("protocol", ["eventual", "saturn", "c3"])
def test_the_answer_never_overtakes_the_question_on_a_congested_link(tmp_path, protocol):
    topology = with_bandwidth(load_topology("causality-3region.toml", protocol=protocol), MBIT)
    cluster = Cluster(topology, tmp_path / "run")
    stop = threading.Event()
    with cluster, CausalClient.connect(topology.client_address("a")) as client:
        flooding = threading.Thread(
            target=flood, args=(flood_endpoint(topology, "A", "C"), 60.0, stop), daemon=True
        )
        flooding.start()
        try:
            writer, relay, observer = client.session("a"), client.session("b"), client.session("c")
            outcomes = [question_and_answer(writer, relay, observer) for _ in range(ROUNDS)]
        finally:
            stop.set()
            flooding.join(30)
    violations = sum(violation for violation, _ in outcomes)
    expect_caught(protocol, violations, ROUNDS, "an answer seen before its question on a congested link")
    if protocol != "eventual":  # the flood did hold the question back: the test had something to catch
        assert min(delay for _, delay in outcomes) > 0.3, outcomes
