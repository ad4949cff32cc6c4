"""The data model on a real two-region cluster: LWW cells, tombstones, counters, slices, batches."""

from __future__ import annotations

import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.waiting import eventually, unique
from helpers.wan_faults import partition

from causal_client import CausalClient, InvalidRequest, Label, Mutation, ReadSpec, Row

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

REGIONS = ("a", "b")


@pytest.fixture
def sessions(two_regions, client_for):
    client = client_for(two_regions)
    return {region: client.session(region) for region in REGIONS}


def replicated(sessions, origin: str) -> None:
    """Returns once everything ``origin`` wrote so far is applied at every region.

    Bulk transfer ships a gear's stream in order, so a sentinel written last is seen last."""
    row = unique("sentinel")
    sessions[origin].write("all", row, {"s": "1"})
    for region in REGIONS:
        eventually(lambda region=region: sessions[region].read("all", row))


def ahead_of_every_gear(sessions, seconds: float) -> int:
    """A ts ``seconds`` ahead of both the clock and every gear's last label (they only go up)."""
    latest = [sessions[r].write("all", unique("warm"), {"c": "x"}).ts for r in REGIONS]
    return max(*latest, int(time.time() * 1e6)) + int(seconds * 1e6)


def hold_the_link(cluster) -> None:
    """A write made at one region cannot reach the other before the test's next step, however
    long a loaded machine keeps this process from running (the link's 20 ms was not always
    enough): the link held for 1.5 s, then let through in order."""
    partition(cluster, ("A", "B"), 1.5)


def text_everywhere(sessions, row: str, column: str) -> dict[str, str | None]:
    return {r: sessions[r].read("all", row, [column]).text(column) for r in REGIONS}


# -- last writer wins ----------------------------------------------------------------------------
def test_concurrent_writes_converge_to_the_greater_label(sessions):
    row = unique("lww")
    start = threading.Barrier(2)

    def write(region: str) -> Label:
        start.wait()
        return sessions[region].write("all", row, {"c": f"from-{region}"})

    with ThreadPoolExecutor(2) as pool:
        labels = dict(zip(REGIONS, pool.map(write, REGIONS), strict=True))
    winner = max(REGIONS, key=lambda r: labels[r])
    eventually(lambda: text_everywhere(sessions, row, "c") == {"a": f"from-{winner}", "b": f"from-{winner}"})
    for region in REGIONS:
        cell = sessions[region].read("all", row).cell("c")
        assert cell is not None and cell.label.sort_key() == labels[winner].sort_key()


def test_equal_timestamps_are_broken_by_source(sessions, client_for, two_regions):
    """Both gears are pushed to the same ts: the write of the greater src ("b/0") must win in both."""
    row = unique("tie")
    ahead = ahead_of_every_gear(sessions, 5)
    client = client_for(two_regions)
    # any valid source will do: the gear takes ts = client ts + 1 when that is above its clock
    in_a = client.session("a", label=Label(ts=ahead, src="b/0"))
    in_b = client.session("b", label=Label(ts=ahead, src="a/0"))
    hold_the_link(two_regions)  # neither write reaches the other region before both are made
    la = in_a.write("all", row, {"c": "from-a"})
    lb = in_b.write("all", row, {"c": "from-b"})
    assert la.ts == lb.ts == ahead + 1
    assert la < lb
    eventually(lambda: text_everywhere(sessions, row, "c") == {"a": "from-b", "b": "from-b"})
    replicated(sessions, "a")
    assert text_everywhere(sessions, row, "c") == {"a": "from-b", "b": "from-b"}


def test_a_write_with_a_smaller_label_loses_even_when_it_arrives_last(sessions, client_for, two_regions):
    """Deterministic arrival order: the winner exists before the loser is even made."""
    row = unique("lww-det")
    ahead = Label(ts=ahead_of_every_gear(sessions, 5), src="b/0")
    late_writer = client_for(two_regions).session("b")  # connected first: the write must not wait
    hold_the_link(two_regions)  # the loser is made before the winner reaches b
    winner = client_for(two_regions).session("a", label=ahead).write("all", row, {"c": "winner"})
    loser = late_writer.write("all", row, {"c": "loser"})  # before the winner reaches b (its clock)
    assert loser < winner
    replicated(sessions, "b")
    replicated(sessions, "a")
    assert text_everywhere(sessions, row, "c") == {"a": "winner", "b": "winner"}


def test_a_later_write_overwrites_and_replicates(sessions):
    row = unique("over")
    sessions["a"].write("all", row, {"c": "1", "keep": "k"})
    sessions["a"].write("all", row, {"c": "2"})
    eventually(lambda: text_everywhere(sessions, row, "c") == {"a": "2", "b": "2"})
    assert sessions["b"].read("all", row).as_dict() == {"c": b"2", "keep": b"k"}


# -- tombstones ----------------------------------------------------------------------------------
def test_tombstone_wins_over_an_older_write_that_arrives_later(sessions, client_for, two_regions):
    row = unique("tomb")
    older = sessions["b"].write("all", row, {"c": "old", "other": "stays"})
    # a session in a that has seen the write in b (its label), but before the write got there
    deleter = client_for(two_regions).session("a", label=older.to_token())
    tombstone = deleter.delete("all", row, ["c"])
    assert tombstone > older
    assert "c" not in deleter.read("all", row)
    replicated(sessions, "b")  # the older write has certainly reached a now
    replicated(sessions, "a")  # and the tombstone has reached b
    for region in REGIONS:
        seen = sessions[region].read("all", row)
        assert "c" not in seen, region
        assert seen.text("other") == "stays"
        assert "c" not in sessions[region].slice("all", row, limit=10)


def test_tombstone_from_the_future_beats_a_write_made_afterwards(sessions, client_for, two_regions):
    """Deterministic arrival order: the delete exists before the older-labelled write is made."""
    row = unique("tomb-det")
    sessions["a"].write("all", row, {"c": "v1"})
    replicated(sessions, "a")
    ahead = Label(ts=ahead_of_every_gear(sessions, 5), src="a/0")
    late_writer = client_for(two_regions).session("b")  # connected first: the write must not wait
    hold_the_link(two_regions)  # the late write is made before the delete reaches b
    tombstone = client_for(two_regions).session("a", label=ahead).delete("all", row, ["c"])
    late = late_writer.write("all", row, {"c": "late"})
    assert late < tombstone
    replicated(sessions, "b")
    replicated(sessions, "a")
    assert text_everywhere(sessions, row, "c") == {"a": None, "b": None}


def test_an_older_increment_arriving_after_a_delete_stays_deleted(sessions, client_for, two_regions):
    row = unique("tomb-counter")
    sessions["a"].write("all", row, {"x": "1", "y": "2"})
    replicated(sessions, "a")
    ahead = Label(ts=ahead_of_every_gear(sessions, 5), src="a/0")
    late_writer = client_for(two_regions).session("b")  # connected first: the write must not wait
    hold_the_link(two_regions)  # the increment is made before the delete reaches b
    tombstone = client_for(two_regions).session("a", label=ahead).delete("all", row, ["n"])
    late = late_writer.increment("all", row, "n", 5)
    assert late < tombstone
    replicated(sessions, "b")
    replicated(sessions, "a")
    for region in REGIONS:
        assert sessions[region].read("all", row).columns == ["x", "y"], region
        # a full page: the deleted column takes no place in the slice order
        page = sessions[region].slice("all", row, limit=2, reverse=False)
        assert page.columns == ["x", "y"], region


def test_a_newer_write_after_a_delete_brings_the_column_back(sessions):
    row = unique("revive")
    sessions["a"].write("all", row, {"c": "1"})
    sessions["a"].delete("all", row, ["c"])
    assert sessions["a"].read("all", row) == Row("all", row)
    sessions["a"].write("all", row, {"c": "2"})
    eventually(lambda: text_everywhere(sessions, row, "c") == {"a": "2", "b": "2"})


def test_deleting_a_column_that_never_existed(sessions):
    row = unique("ghost")
    sessions["a"].delete("all", row, ["nope"])
    assert len(sessions["a"].read("all", row)) == 0


# -- counters ------------------------------------------------------------------------------------
def test_counters_converge_to_the_sum_of_increments_in_both_regions(sessions):
    row = unique("counter")
    amounts = {"a": [1, 5, 10, -2, 1] * 4, "b": [3, 3, -1, 7] * 5}

    def bump(region: str) -> None:
        for amount in amounts[region]:
            sessions[region].increment("all", row, "likes", amount)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(bump, REGIONS))
    total = sum(amounts["a"]) + sum(amounts["b"])
    eventually(lambda: all(sessions[r].read("all", row).counter("likes") == total for r in REGIONS))
    replicated(sessions, "a")
    replicated(sessions, "b")
    for region in REGIONS:
        cell = sessions[region].read("all", row).cell("likes")
        assert cell is not None and cell.counter == total and cell.value == b""


def test_counter_and_value_columns_in_one_row(sessions):
    row = unique("mixed")
    sessions["a"].apply(Mutation("all", row).set("name", "x").increment("n", 2).increment("m", -4))
    seen = sessions["a"].read("all", row)
    assert seen.as_dict() == {"name": b"x"}
    assert (seen.counter("n"), seen.counter("m"), seen.counter("name")) == (2, -4, 0)
    assert seen.columns == ["m", "n", "name"]


def test_increment_of_a_value_column_is_refused_and_writes_nothing(sessions):
    row = unique("type-a")
    sessions["a"].write("all", row, {"v": "text"})
    with pytest.raises(InvalidRequest, match="holds a value"):
        sessions["a"].apply(Mutation("all", row).set("other", "x").increment("v"))
    seen = sessions["a"].read("all", row)
    assert seen.as_dict() == {"v": b"text"}


def test_set_of_a_counter_column_is_refused_and_writes_nothing(sessions):
    row = unique("type-b")
    sessions["a"].increment("all", row, "n", 3)
    with pytest.raises(InvalidRequest, match="counter"):
        sessions["a"].apply(Mutation("all", row).increment("m", 1).set("n", "7"))
    seen = sessions["a"].read("all", row)
    assert seen.columns == ["n"] and seen.counter("n") == 3
    with pytest.raises(InvalidRequest, match="counter"):
        sessions["a"].batch(
            [Mutation("all", unique("type-c")).set("x", "1"), Mutation("all", row).set("n", "")]
        )
    assert sessions["a"].read("all", row).counter("n") == 3


def test_counter_type_is_known_in_the_other_region_too(sessions):
    row = unique("type-remote")
    sessions["a"].increment("all", row, "n")
    eventually(lambda: sessions["b"].read("all", row).counter("n") == 1)
    with pytest.raises(InvalidRequest, match="counter"):
        sessions["b"].write("all", row, {"n": "1"})


# -- slices --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wide_row(two_regions):
    """A row of 95 columns c000..c094 written in one mutation."""
    with CausalClient.connect(two_regions.topology.client_address("a")) as client:
        row = unique("wide")
        client.session("a").write("all", row, {f"c{i:03d}": f"v{i}" for i in range(95)})
    return row, [f"c{i:03d}" for i in range(95)]


def pages(session, row: str, limit: int, reverse: bool) -> list[Row]:
    out, after = [], None
    while True:
        page = session.slice("all", row, limit=limit, after=after, reverse=reverse)
        out.append(page)
        if page.next_cursor is None:
            return out
        assert len(out) < 10, "paging does not end"
        after = page.next_cursor


def test_slices_newest_first_page_by_cursor(sessions, wide_row):
    row, columns = wide_row
    got = pages(sessions["a"], row, 40, reverse=True)
    assert [len(p) for p in got] == [40, 40, 15]
    newest_first = columns[::-1]
    assert got[0].columns == newest_first[:40] and got[0].next_cursor == newest_first[39]
    assert got[1].columns == newest_first[40:80] and got[1].next_cursor == newest_first[79]
    assert got[2].columns == newest_first[80:] and got[2].next_cursor is None
    flat = [c for p in got for c in p.columns]
    assert flat == newest_first and len(set(flat)) == 95
    assert got[0].text("c094") == "v94"


def test_forward_slices(sessions, wide_row):
    row, columns = wide_row
    got = pages(sessions["a"], row, 40, reverse=False)
    assert [len(p) for p in got] == [40, 40, 15]
    assert got[0].next_cursor == "c039" and got[1].next_cursor == "c079"
    assert [c for p in got for c in p.columns] == columns


def test_slices_in_the_other_region_after_replication(sessions, wide_row):
    row, columns = wide_row
    eventually(lambda: len(sessions["b"].read("all", row)) == 95)
    assert [c for p in pages(sessions["b"], row, 30, reverse=True) for c in p.columns] == columns[::-1]


def test_slice_from_a_cursor_in_the_middle_and_default_limit(sessions, wide_row):
    row, _ = wide_row
    assert sessions["a"].slice("all", row, limit=3, after="c050").columns == ["c049", "c048", "c047"]
    assert sessions["a"].slice("all", row, limit=3, after="c050", reverse=False).columns == [
        "c051",
        "c052",
        "c053",
    ]
    # a cursor that is not a column still splits the order where it would sort
    assert sessions["a"].slice("all", row, limit=2, after="c050x").columns == ["c050", "c049"]
    assert len(sessions["a"].slice("all", row)) == 40


def test_slices_skip_deleted_columns(sessions):
    row = unique("slice-del")
    sessions["a"].write("all", row, {f"k{i}": "x" for i in range(6)})
    sessions["a"].delete("all", row, ["k4", "k1"])
    page = sessions["a"].slice("all", row, limit=3)
    assert page.columns == ["k5", "k3", "k2"] and page.next_cursor == "k2"
    rest = sessions["a"].slice("all", row, limit=3, after=page.next_cursor)
    assert rest.columns == ["k0"] and rest.next_cursor is None


def test_every_read_says_how_many_live_columns_its_row_has(sessions):
    """A row's size counts the set, whatever was read (a page, named cells, nothing at all):
    deletes leave it, concurrent sets of one column from two regions count once, counters count."""
    row = unique("size")
    assert sessions["a"].slice("all", row, limit=1).size == 0
    sessions["a"].write("all", row, {f"k{i}": "x" for i in range(6)})
    sessions["a"].delete("all", row, ["k4", "k1"])
    sessions["a"].increment("all", row, "n", 3)
    assert sessions["a"].slice("all", row, limit=1).size == 5
    assert sessions["a"].read("all", row, ["k0"]).size == 5
    sessions["b"].write("all", row, {"k0": "again", "k9": "new"})  # k0 twice, from two regions
    replicated(sessions, "b")
    replicated(sessions, "a")
    assert {r: sessions[r].read("all", row, ["nothing"]).size for r in REGIONS} == {"a": 6, "b": 6}
    assert sessions["a"].read("all", row).size == len(sessions["a"].read("all", row))


# -- reads ---------------------------------------------------------------------------------------
def test_whole_row_read(sessions):
    row = unique("whole")
    sessions["a"].write("all", row, {"b": "2", "a": "1", "c": "3"})
    sessions["a"].increment("all", row, "n", 4)
    sessions["a"].delete("all", row, ["c"])
    seen = sessions["a"].read("all", row)
    assert (seen.group, seen.key) == ("all", row)
    assert seen.columns == ["a", "b", "n"]
    assert seen.as_dict() == {"a": b"1", "b": b"2"}
    assert seen.counter("n") == 4
    assert seen.next_cursor is None
    assert all(cell.label.src == "a/0" and cell.label.target == f"all/{row}" for cell in seen)


def grow(session, row: str, start: int, end: int) -> None:
    """Columns c{start}..c{end-1} (numbered so they sort in order), in pieces a mutation allows."""
    step = 1000
    for first in range(start, end, step):
        values = {f"c{i:05d}": "v" for i in range(first, min(first + step, end))}
        session.write("all", row, values)


def test_whole_row_reads_up_to_the_limit_and_a_clear_error_beyond(sessions):
    """Wide rows (timelines, follower lists) read whole up to MAX_ROW_COLUMNS, around Lua's
    unpack limit (~8,000) included; one column more is an InvalidRequest that says what to do,
    never a cut row or an internal error; slices still read it; deleting a column makes it fit."""
    from causal_client.wire import MAX_ROW_COLUMNS, MAX_SLICE

    session = sessions["a"]
    row = unique("wide")
    grow(session, row, 0, 7999)
    for width in (7999, 8000, 8001, MAX_ROW_COLUMNS):
        grow(session, row, len(session.read("all", row)), width)
        whole = session.read("all", row)
        assert len(whole) == width and whole.columns[-1] == f"c{width - 1:05d}"
        assert len(session.multi_read([ReadSpec("all", row), ReadSpec("all", unique("other"))])[0]) == width
    grow(session, row, MAX_ROW_COLUMNS, MAX_ROW_COLUMNS + 1)
    with pytest.raises(InvalidRequest, match=f"more than {MAX_ROW_COLUMNS} columns: read it in slices"):
        session.read("all", row)
    with pytest.raises(InvalidRequest, match="read it in slices"):
        session.multi_read([ReadSpec("all", unique("other")), ReadSpec("all", row)])
    page = session.slice("all", row, limit=MAX_SLICE)
    assert len(page) == MAX_SLICE and page.columns[0] == f"c{MAX_ROW_COLUMNS:05d}"
    assert session.read("all", row, ["c00000", f"c{MAX_ROW_COLUMNS:05d}"]).columns == [
        "c00000", f"c{MAX_ROW_COLUMNS:05d}"
    ]  # fmt: skip
    session.delete("all", row, ["c00000"])
    assert len(session.read("all", row)) == MAX_ROW_COLUMNS


def test_named_columns_read(sessions):
    row = unique("named")
    sessions["a"].write("all", row, {"x": "1", "y": "2", "z": "3"})
    seen = sessions["a"].read("all", row, ["z", "x", "missing"])
    assert seen.as_dict() == {"z": b"3", "x": b"1"}
    assert "missing" not in seen and "y" not in seen


def test_read_label_is_merged_into_the_session(sessions, client_for, two_regions):
    row = unique("merge")
    label = sessions["a"].write("all", row, {"c": "1"})
    reader = client_for(two_regions).session("a")
    assert reader.label.is_zero
    reader.read("all", row)
    assert reader.label.sort_key() == label.sort_key()


def test_multi_read_across_rows_in_one_call(sessions, wide_row):
    rows = [unique(f"multi{i}") for i in range(3)]
    sessions["a"].batch([Mutation("all", r).set("c", r).set("d", "d") for r in rows])
    missing = unique("multi-missing")
    wide, _ = wide_row
    specs = [
        ReadSpec("all", rows[2]),
        ReadSpec("all", missing),
        ReadSpec("all", rows[0], ("c",)),
        ReadSpec("all", wide, limit=5),
        ReadSpec("all", rows[1], ("d", "nope")),
    ]
    got = sessions["a"].multi_read(specs)
    assert [r.key for r in got] == [rows[2], missing, rows[0], wide, rows[1]]
    assert got[0].as_dict() == {"c": rows[2].encode(), "d": b"d"}
    assert len(got[1]) == 0
    assert got[2].as_dict() == {"c": rows[0].encode()}
    assert got[3].columns == ["c094", "c093", "c092", "c091", "c090"] and got[3].next_cursor == "c090"
    assert got[4].as_dict() == {"d": b"d"}
    assert sessions["a"].label >= max(c.label for r in got for c in r)


def test_read_of_a_missing_row_is_empty(sessions):
    row = unique("missing")
    for region in REGIONS:
        for seen in (
            sessions[region].read("all", row),
            sessions[region].read("all", row, ["a", "b"]),
            sessions[region].slice("all", row, limit=10),
            sessions[region].slice("all", row, limit=10, reverse=False),
        ):
            assert seen == Row("all", row)
            assert len(seen) == 0 and not seen and seen.next_cursor is None


# -- batches -------------------------------------------------------------------------------------
@pytest.mark.parametrize("atomic", [True, False], ids=["atomic", "each its own"])
def test_batch_writes_several_rows(sessions, atomic):
    """An atomic batch is one update under one label; with atomic=False each row gets its own
    label, in order."""
    rows = [unique(f"batch{i}") for i in range(4)]
    mutations = [Mutation("all", r).set("i", str(i)).increment("n", i + 1) for i, r in enumerate(rows)]
    mutations.append(Mutation("all", rows[0]).set("extra", "e"))
    label = sessions["a"].batch(mutations, atomic=atomic)
    assert sessions["a"].label == label
    cells = [sessions["a"].read("all", r).cell("i") for r in rows]
    labels = [cell.label for cell in cells if cell]
    extra = sessions["a"].read("all", rows[0]).cell("extra")
    assert len(labels) == 4 and extra
    if atomic:
        assert {x.sort_key() for x in [*labels, extra.label]} == {label.sort_key()}
        assert label.target == f"all/{rows[0]}"
    else:
        assert all(x < y for x, y in itertools.pairwise(labels))
        assert extra.label.sort_key() == label.sort_key() and label.target == f"all/{rows[0]}"
        assert all(x.sort_key() < label.sort_key() for x in labels)

    def arrived():
        got = sessions["b"].multi_read([ReadSpec("all", r) for r in rows])
        return [(r.text("i"), r.counter("n")) for r in got] == [(str(i), i + 1) for i in range(4)]

    eventually(arrived)
    assert sessions["b"].read("all", rows[0]).text("extra") == "e"


def test_a_rows_size_crosses_the_gateway():
    """Clients behind the gateway get the size too (RowResult.size)."""
    row = Row("all", "r", (), None, 7)
    assert Row.from_proto(row.to_proto()) == row
