"""A full store (loadtest/check/nemesis.py's ``store-full``: a master at its memory limit): a
write is refused with ``StoreFull``, a typed, retryable error that says so, and nothing of it is
written; reads go on; once the store has room, writes go through again with nobody restarting
anything, and a checked run under the fault loses nothing."""

from __future__ import annotations

import pytest
from helpers.waiting import unique

from causal_client import CausalClient, StoreFull
from causal_client.errors import retryable_errors
from loadtest.check.nemesis import full_store

pytestmark = pytest.mark.cluster


def test_a_write_to_a_full_store_is_refused_by_type_and_goes_through_once_there_is_room(launch):
    cluster = launch("two-region.toml", protocol="saturn")
    with CausalClient.connect(cluster.topology.client_address("a")) as client:
        session = client.session("a")
        kept, refused = unique("kept"), unique("refused")
        session.write("all", kept, {"v": "before"})
        with full_store(cluster.topology, "a"):
            with pytest.raises(StoreFull, match=r"the store is full .*nothing was written"):
                session.write("all", refused, {"v": "while full"})
            assert StoreFull in retryable_errors()
            assert session.read("all", kept).text("v") == "before"  # reads go on
        assert not session.read("all", refused).cells  # nothing of the refused write
        session.write("all", refused, {"v": "after"})  # the same session, nothing restarted
        assert session.read("all", refused).text("v") == "after"
