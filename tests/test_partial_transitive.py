"""A causal past that passes through a region that does not replicate part of it (partial
replication), under every protocol; `eventual` shows the anomaly, the others never.

causality-3region (a-c 100 ms, a-b and b-c 5 ms) with group "ac" replicated at a and c only, and
"ab" at a and b only. A writer at a writes u (group "ac"), moves to b and writes w (group "ab"),
which depends on u. A reader at b reads w, then moves to c and reads u's row: u is in its past
(through w), so it must be there. Neither u nor w ever reaches b and c together, so no region's
data alone tells that the reader needs u at c: Saturn learns it from the tree's order (u's label
passed b before w was written), GentleRain from the reader's timestamp (above u's), Cure from the
reader's vector, which holds u's entry only because reading w's row at b hands over the row's
dependencies (common.lua's ``merge_deps``), not just w's own (b, ts).
"""

from __future__ import annotations

import pytest
from helpers.topologies import with_groups
from helpers.waiting import play_until_caught, unique

from causal_client import CausalClient

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

ROUNDS = 8


def topology(protocol: str) -> dict:
    return with_groups("causality-3region.toml", {"ac": ["a", "c"], "ab": ["a", "b"], "all": ["*"]}, protocol)


@pytest.mark.parametrize("protocol", ["eventual", "saturn", "gentlerain", "cure", "c3"])
def test_a_past_through_a_region_that_lacks_part_of_it(launch, protocol):
    cluster = launch(topology(protocol))
    with CausalClient.connect(cluster.topology.client_address("a")) as client:

        def missed() -> bool:
            u_row, w_row = unique("u"), unique("w")
            writer = client.session("a", auto_migrate=False)
            writer.write("ac", u_row, {"text": "u"})
            writer.migrate("b")
            writer.write("ab", w_row, {"text": "w, after u"})
            reader = client.session("b", auto_migrate=False)
            assert reader.read("ab", w_row).text("text") == "w, after u"
            reader.migrate("c")
            return len(reader.read("ac", u_row)) == 0

        play_until_caught(protocol, missed, "a past through a region that lacks part of it", ROUNDS)
