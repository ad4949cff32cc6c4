"""A session resumed from its token at any region sees its whole past (read-your-writes, monotonic
reads, causal order), whichever way it gets there.

A session's label is only the greatest label it has seen, not a summary of where its past is: a
label made at region A does not mean that A holds what the session wrote elsewhere. The sequence
that broke on causality-3region (A→C slow, A→B and B→C fast): the session writes x at C,
migrates to B, reads there a newer y written at A by someone else (its label is now y's, made at
A), then resumes at A from its token. x is still on its way from C to A (100 ms): a resume that
trusts "made here" reads nothing. Every test runs under `eventual` too, where the same sequence
must be caught, or it proves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from helpers.clusters import cluster_under, connected_client
from helpers.waiting import eventually, play_until_caught, unique

from causal_client import CausalClient, LabelType, Session
from services.launcher.cluster import Cluster

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

ROUNDS = 10
POLL_S = 0.001


@pytest.fixture(scope="module", params=["eventual", "saturn"])
def cluster(request, tmp_path_factory) -> Iterator[Cluster]:
    with cluster_under(request.param, "causality-3region.toml", tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster) -> Iterator[CausalClient]:
    with connected_client(cluster, "a") as client:
        yield client


def play(cluster: Cluster, missed: Callable[[], bool], what: str) -> None:
    """``missed()``: True when the resumed session did not read its own write (x is in flight
    for 100 ms)."""
    play_until_caught(cluster.topology.protocol, missed, what, ROUNDS)


def past_elsewhere(client: CausalClient) -> tuple[Session, str]:
    """The session of the issue's sequence: wrote x at c, moved to b, read there a newer y made
    at a. Returns it (attached at b, its label made at a) and x's row."""
    session = client.session("c")
    x = unique("x")
    session.write("all", x, {"v": "x"})
    session.migrate("b")
    y = unique("y")
    client.session("a").write("all", y, {"v": "y"})
    eventually(lambda: len(session.read("all", y)) > 0, interval=POLL_S)
    assert session.region == "b" and session.label.region == "a"
    return session, x


def test_resuming_at_the_region_that_made_the_label_keeps_the_sessions_writes(cluster, client):
    def missed() -> bool:
        session, x = past_elsewhere(client)
        return len(client.session("a", label=session.token).read("all", x)) == 0

    play(cluster, missed, "read-your-writes on a resume at the label's region")


@pytest.mark.parametrize("form", ["label", "label token"])
def test_a_bare_label_made_here_waits_for_every_origin(cluster, client, form):
    """The issue's sequence with the label alone (no region to migrate from): the region that
    made it must still wait until every origin has passed it."""

    def missed() -> bool:
        session, x = past_elsewhere(client)
        bare = session.label if form == "label" else session.label.to_token()
        return len(client.session("a", label=bare).read("all", x)) == 0

    play(cluster, missed, "read-your-writes on a resume from a bare label")


def test_a_hand_off_ticket_brings_the_past(cluster, client):
    """A migration label prepared at the session's region (a web app's travel) resumes there."""

    def missed() -> bool:
        session, x = past_elsewhere(client)
        ticket = session.prepare_migration("a")
        return len(client.session("a", label=ticket.to_token()).read("all", x)) == 0

    play(cluster, missed, "read-your-writes after a hand-off")


def test_a_session_resumed_at_its_own_region_needs_no_call(cluster, client, store_calls):
    session, x = past_elsewhere(client)
    store_calls.clear()
    resumed = client.session("b", label=session.token)
    assert store_calls == []
    assert (resumed.region, resumed.label) == ("b", session.label)
    if cluster.topology.protocol == "eventual":  # its migration waited for nothing: x may lag
        eventually(lambda: resumed.read("all", x).text("v") == "x", interval=POLL_S)
    else:
        assert resumed.read("all", x).text("v") == "x"


@pytest.mark.parametrize("way", ["token", "migrate"])
def test_moving_away_from_a_region_that_is_down_waits_for_every_origin(cluster, way):
    """The session's region (b) cannot be reached (by this client: its stores' address leads
    nowhere), so no migration label can be made there: the session attaches at a with its label
    and waits until every origin has passed it."""
    unreachable = {"b": ["127.0.0.1:9"]}  # nothing listens on the discard port

    def missed() -> bool:
        with (
            CausalClient.connect(cluster.topology.client_address("a")) as client,
            CausalClient.connect(cluster.topology.client_address("a"), endpoints=unreachable) as cut_off,
        ):
            session, x = past_elsewhere(client)
            if way == "token":
                session = cut_off.session("a", label=session.token)
            else:
                session = Session(cut_off, "b", session.label)
                session.migrate("a")
            assert session.region == "a"
            return len(session.read("all", x)) == 0

    play(cluster, missed, "read-your-writes when the session's region is down")


def test_a_session_holds_a_migration_label_only_where_it_leads(cluster, client):
    """A migration label vouches for what its session had seen when it was made, at its target
    only (§4.3). A prepared one is not taken as the session's label (the session may do more
    before anyone uses it); one used anywhere but its target becomes a plain label, so that,
    presented again, it makes a region wait for every origin, never less."""
    session, _ = past_elsewhere(client)
    before = session.label
    ticket = session.prepare_migration("c")
    assert ticket.type == LabelType.MIGRATION and ticket.target == "c" and ticket > before
    assert session.label == before  # prepared, not taken
    session.migrate("c")  # Alg. 1: the session takes the migration label it arrived with
    assert session.label.type == LabelType.MIGRATION and session.label.target == "c"
    assert session.label > ticket
    elsewhere = client.session("b", label=ticket)  # a ticket for c, used at b
    assert elsewhere.label.type == LabelType.UPDATE and elsewhere.label.sort_key() == ticket.sort_key()
    resumed = client.session("a", label=session.token)  # migrates from c
    assert resumed.region == "a" and resumed.label.type == LabelType.MIGRATION
    assert resumed.label.target == "a" and resumed.label > session.label


def test_attach_false_no_longer_skips_the_wait(cluster, client):
    """``attach=False`` trusted the caller; it is deprecated and the past is waited for anyway."""

    def missed() -> bool:
        session, x = past_elsewhere(client)
        with pytest.warns(DeprecationWarning, match="attach=False"):
            resumed = client.session("a", label=session.label, attach=False)
        return len(resumed.read("all", x)) == 0

    play(cluster, missed, "read-your-writes with attach=False")
