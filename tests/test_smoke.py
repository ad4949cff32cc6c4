"""End-to-end: a write in one region becomes visible in the other."""

import pytest
from helpers.waiting import eventually, unique

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_write_in_a_is_visible_in_b(two_regions, client_for):
    client = client_for(two_regions)
    writer, reader = client.session("a"), client.session("b")
    row = unique("user")
    label = writer.write("all", row, {"name": "Alice"})
    assert label.region == "a" and label.ts > 0
    seen = eventually(lambda: reader.read("all", row))
    assert seen.text("name") == "Alice"
    assert reader.label >= label  # the reader's causal past now includes the write
