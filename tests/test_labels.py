"""Saturn labels: their order, merge and token form (pure), and the labels a real cluster hands out."""

from __future__ import annotations

import base64
import itertools
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.waiting import unique

from causal_client import (
    CausalClient,
    CausalError,
    InvalidLabel,
    InvalidRequest,
    Label,
    LabelType,
    RegionInfo,
)
from causal_client.label import MAX_TARGET_BYTES, max_label
from causal_client.proto import store_pb2


def token_of(**fields) -> str:
    raw = store_pb2.Label(**fields).SerializeToString()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# -- order ---------------------------------------------------------------------------------------
def test_labels_are_ordered_by_ts_first():
    assert Label(ts=1, src="z/9") < Label(ts=2, src="a/0")
    assert Label(ts=2, src="a/0") > Label(ts=1, src="z/9")


def test_equal_ts_is_ordered_by_src():
    assert Label(ts=5, src="a/0") < Label(ts=5, src="b/0")
    assert Label(ts=5, src="a/0") < Label(ts=5, src="a/1")
    assert not Label(ts=5, src="b/0") < Label(ts=5, src="a/0")


def test_sorting_a_shuffled_list_gives_ts_then_src_order():
    expected = [Label(ts, src) for ts in (1, 2, 10, 1_700_000_000_000_000) for src in ("a/0", "a/1", "b/0")]
    shuffled = expected[::-1][1::2] + expected[::-1][0::2]
    assert sorted(shuffled) == expected


def test_order_is_total_over_distinct_labels():
    labels = [Label(ts, src) for ts in (3, 4) for src in ("a/0", "b/0", "c/1")]
    for x, y in itertools.permutations(labels, 2):
        assert (x < y) != (y < x)
        assert x != y


# -- uniqueness ----------------------------------------------------------------------------------
def test_labels_with_same_fields_are_equal_and_hash_alike():
    x, y = Label(ts=7, src="a/0", target="g/r"), Label(ts=7, src="a/0", target="g/r")
    assert x == y and hash(x) == hash(y)
    assert len({x, y}) == 1


def test_labels_differing_in_ts_src_or_type_are_distinct():
    base = Label(ts=7, src="a/0")
    others = [
        Label(ts=8, src="a/0"),
        Label(ts=7, src="b/0"),
        Label(ts=7, src="a/1"),
        Label(ts=7, src="a/0", type=LabelType.MIGRATION),
    ]
    for other in others:
        assert other != base
    assert len({base, *others}) == 5


def test_labels_are_immutable():
    label = Label(ts=1, src="a/0")
    with pytest.raises(AttributeError):
        label.ts = 2  # type: ignore[misc]


# -- merge ---------------------------------------------------------------------------------------
def test_merge_returns_the_greater_label_either_way():
    small, big = Label(ts=5, src="b/0"), Label(ts=6, src="a/0")
    assert small.merge(big) is big
    assert big.merge(small) is big
    tie_lo, tie_hi = Label(ts=5, src="a/0"), Label(ts=5, src="b/0")
    assert tie_lo.merge(tie_hi) is tie_hi
    assert tie_hi.merge(tie_lo) is tie_hi


def test_merge_with_itself_zero_or_none_keeps_the_label():
    label = Label(ts=5, src="a/0")
    assert label.merge(label) == label
    assert label.merge(Label.zero()) is label
    assert Label.zero().merge(label) is label
    assert label.merge(None) is label


def test_max_label_of_several():
    labels = [Label(3, "a/0"), Label(9, "a/0"), Label(9, "b/0"), Label(1, "c/0")]
    assert max_label(labels) == Label(9, "b/0")
    assert max_label([]) == Label.zero()


# -- zero ----------------------------------------------------------------------------------------
def test_zero_label_is_below_every_real_label():
    zero = Label.zero()
    assert zero.is_zero and zero.region == ""
    for label in (Label(0, "a/0"), Label(1, "a/0"), Label(1, "0/0"), Label(2**62, "z/9")):
        assert zero < label
        assert not label.is_zero
        assert not label < zero


def test_zero_label_comes_from_empty_or_default_wire_forms():
    assert Label.from_proto(None).is_zero
    assert Label.from_proto(store_pb2.Label()).is_zero
    assert Label.from_token("").is_zero
    assert Label.zero().to_token() == ""


def test_region_is_the_gear_prefix():
    assert Label(1, "virginia/3").region == "virginia"


# -- tokens --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "label",
    [
        Label(ts=1, src="a/0"),
        Label(ts=1_700_000_000_123_456, src="virginia/12", target="all/user:alice"),
        Label(ts=2**62, src="b/0", type=LabelType.MIGRATION, target="frankfurt"),
        Label(ts=42, src="a/0", target="grüße/ключ ✓"),
        Label.zero(),
    ],
    ids=str,
)
def test_token_round_trip(label):
    token = label.to_token()
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    back = Label.from_token(token)
    assert back == label
    assert (back.ts, back.src, back.type, back.target) == (label.ts, label.src, label.type, label.target)


def test_token_survives_padding_being_put_back():
    label = Label(ts=123456789, src="a/0", target="g/r")
    token = label.to_token()
    assert Label.from_token(token + "=" * (-len(token) % 4)) == label


@pytest.mark.parametrize(
    "token",
    [
        "!!!",
        "%%%%",
        "not a token",
        "\x00",
        "a",
        "abc",
        "AAAA",
        "____",
        "Zm9v",  # base64 of b"foo"
        "GgJ4eA",  # a protobuf message whose field 3 has the wrong wire type
        token_of(ts=-5, src="a/0"),  # decodes, but an impossible label
        token_of(ts=5, src="noslash"),
        token_of(ts=5, src=""),
        token_of(ts=5, src="a/0", type=7),
        token_of(ts=5, src="a/0", target="x" * (MAX_TARGET_BYTES + 1)),
        Label(1, "a/0").to_token() + "!",
        " " + Label(1, "a/0").to_token(),
    ],
)
def test_garbage_tokens_raise_invalid_label(token):
    with pytest.raises(InvalidLabel) as info:
        Label.from_token(token)
    assert str(info.value)
    assert isinstance(info.value, InvalidRequest) and isinstance(info.value, CausalError)


def test_session_with_a_garbage_token_fails_before_any_call():
    client = CausalClient([RegionInfo("a", "A", "127.0.0.1:1")])  # nothing listens there
    with pytest.raises(InvalidLabel):
        client.session("a", label="%%%garbage%%%")
    client.close()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"ts": -1, "src": "a/0"}, "timestamp"),
        ({"ts": 1, "src": "a0"}, "source"),
        ({"ts": 1, "src": ""}, "source"),
        ({"ts": 1, "src": "a/0", "type": 3}, "type"),
        ({"ts": 1, "src": "a/0", "target": "t" * (MAX_TARGET_BYTES + 1)}, "target"),
    ],
)
def test_from_proto_rejects_impossible_labels(fields, reason):
    with pytest.raises(InvalidLabel, match=reason):
        Label.from_proto(store_pb2.Label(**fields))


# -- labels made by a real cluster ---------------------------------------------------------------
@pytest.mark.cluster
def test_successive_writes_of_a_session_get_strictly_increasing_labels(two_regions, client_for):
    session = client_for(two_regions).session("a")
    row, other = unique("inc"), unique("inc-other")
    labels = []
    for i in range(15):
        labels.append(session.write("all", row, {"c": str(i)}))
        labels.append(session.write("all", other, {f"c{i}": "x"}))
        labels.append(session.increment("all", row, "n"))
    labels.append(session.delete("all", row, ["c"]))
    assert all(x < y for x, y in itertools.pairwise(labels)), [str(x) for x in labels]
    assert all(label.src == "a/0" for label in labels)
    assert session.label == labels[-1]


@pytest.mark.cluster
def test_labels_keep_increasing_across_a_migration(two_regions, client_for):
    session = client_for(two_regions).session("a")
    row = unique("mig")
    before = session.write("all", row, {"c": "1"})
    session.migrate("b")
    assert session.label.type == LabelType.MIGRATION and session.label > before
    after = session.write("all", row, {"c": "2"})
    assert after > before and after.src == "b/0"


@pytest.mark.cluster
@pytest.mark.parametrize("region", ["a", "b"])
def test_write_ts_is_above_a_client_label_that_is_ahead_of_physical_time(two_regions, client_for, region):
    ahead = Label(ts=int((time.time() + 30) * 1e6), src="a/0")
    session = client_for(two_regions).session(region, label=ahead)
    label = session.write("all", unique("future"), {"c": "x"})
    assert label.ts > ahead.ts
    assert label > ahead and session.label == label
    # and the gear's clock stays ahead for the next client (no going back below it)
    fresh = client_for(two_regions).session(region)
    assert fresh.write("all", unique("future-next"), {"c": "y"}).ts > label.ts


@pytest.mark.cluster
def test_labels_from_two_regions_never_collide(two_regions, client_for):
    client = client_for(two_regions)
    row = unique("collide")

    def writes(region: str) -> list[Label]:
        session = client.session(region)
        return [session.write("all", row, {region: str(i)}) for i in range(40)]

    with ThreadPoolExecutor(2) as pool:
        from_a, from_b = pool.map(writes, ["a", "b"])
    labels = from_a + from_b
    assert {label.src for label in from_a} == {"a/0"} and {label.src for label in from_b} == {"b/0"}
    keys = {label.sort_key() for label in labels}
    assert len(keys) == len(labels)
    for x, y in itertools.product(from_a, from_b):
        assert x != y and (x < y) != (y < x)
