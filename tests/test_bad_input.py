"""Bad input gets a clear error (a typed exception, or INVALID_ARGUMENT & co. over raw gRPC), the
store keeps working, and nothing of the bad request is written."""

from __future__ import annotations

import time

import grpc
import pytest
from helpers.deadlines import scaled
from helpers.waiting import eventually, unique

from causal_client import (
    CausalClient,
    InvalidLabel,
    InvalidRequest,
    Label,
    Mutation,
    NotReplicatedHere,
    ReadSpec,
    RegionInfo,
    UnknownRegion,
)
from causal_client.proto import store_pb2, store_pb2_grpc

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


@pytest.fixture
def session(two_regions, client_for):
    return client_for(two_regions).session("a")


@pytest.fixture
def stub(two_regions):
    with grpc.insecure_channel(two_regions.topology.frontend_endpoint("a")) as channel:
        yield store_pb2_grpc.StoreStub(channel)


def still_works(session, row: str, *, replicated: bool = True) -> None:
    """The region serves a good write and read, and the bad request left ``row`` empty (also in b,
    once anything written before the check has had the time to get there)."""
    probe = unique("probe")
    session.write("all", probe, {"ok": "yes"})
    assert session.read("all", probe).text("ok") == "yes"
    assert len(session.read("all", row)) == 0
    if replicated:
        other = CausalClient.connect(session.client.region("b").stores[0])
        try:
            reader = other.session("b")
            eventually(lambda: reader.read("all", probe), what="the probe row at b")
            assert len(reader.read("all", row)) == 0
        finally:
            other.close()


def good_mutation(row: str) -> store_pb2.Mutation:
    return Mutation("all", row).set("c", "v").to_proto()


def rpc_error(call, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(request, timeout=scaled(5))
    return info.value


# -- through the client library ------------------------------------------------------------------
def test_empty_row_key(session):
    with pytest.raises(InvalidRequest, match="row key must not be empty"):
        session.write("all", "", {"c": "v"})
    with pytest.raises(InvalidRequest, match="row key must not be empty"):
        session.read("all", "")
    assert len(session.read("all", "x")) == 0  # nothing leaked to another key either
    still_works(session, unique("unused"))


def test_too_long_row_key(session):
    with pytest.raises(InvalidRequest, match="row key longer than 1024 bytes"):
        session.write("all", "k" * 1025, {"c": "v"})
    still_works(session, "k" * 1024)


def test_empty_column_name(session):
    row = unique("empty-col")
    with pytest.raises(InvalidRequest, match="column name must not be empty"):
        session.write("all", row, {"good": "1", "": "v"})
    with pytest.raises(InvalidRequest, match="column name must not be empty"):
        session.read("all", row, ["ok", ""])
    with pytest.raises(InvalidRequest, match="column name must not be empty"):
        session.increment("all", row, "")
    still_works(session, row)


def test_unknown_group(session):
    row = unique("nogroup")
    with pytest.raises(InvalidRequest, match="unknown group 'nope'"):
        session.write("nope", row, {"c": "v"})
    with pytest.raises(InvalidRequest, match="unknown group"):
        session.read("nope", row)
    with pytest.raises(InvalidRequest, match="group must not be empty"):
        session.write("", row, {"c": "v"})
    assert session.region == "a"  # not a reason to migrate
    still_works(session, row)


def test_oversized_value(session, two_regions):
    limit = two_regions.topology.max_value_bytes
    row = unique("big")
    with pytest.raises(InvalidRequest, match=f"exceeds the limit of {limit} bytes"):
        session.write("all", row, {"small": "x", "big": b"\0" * (limit + 1)})
    still_works(session, row)
    session.write("all", row, {"big": b"\1" * limit})  # exactly the limit is fine
    assert session.read("all", row).get("big") == b"\1" * limit


def test_mutation_with_no_ops(session):
    row = unique("noops")
    with pytest.raises(InvalidRequest, match="at least one column operation"):
        session.apply(Mutation("all", row))
    with pytest.raises(InvalidRequest, match="at least one column operation"):
        session.write("all", row, {})
    with pytest.raises(InvalidRequest, match="at least one column operation"):
        session.batch([Mutation("all", row).set("c", "v"), Mutation("all", unique("x"))])
    still_works(session, row)


def test_empty_batch_and_empty_multi_read(session):
    with pytest.raises(InvalidRequest, match="at least one mutation"):
        session.batch([])
    with pytest.raises(InvalidRequest, match="at least one read"):
        session.multi_read([])
    still_works(session, unique("unused"), replicated=False)


def test_one_bad_mutation_in_a_batch_writes_none_of_it(session):
    rows = [unique("batch-ok"), unique("batch-ok")]
    with pytest.raises(InvalidRequest, match="unknown group"):
        session.batch([Mutation("all", rows[0]).set("c", "v"), Mutation("zz", rows[1]).set("c", "v")])
    still_works(session, rows[0])
    value_row = unique("batch-typed")
    session.write("all", value_row, {"v": "text"})
    with pytest.raises(InvalidRequest, match="holds a value"):
        session.batch([Mutation("all", rows[1]).set("c", "v"), Mutation("all", value_row).increment("v")])
    still_works(session, rows[1])
    assert session.read("all", value_row).as_dict() == {"v": b"text"}


def test_slice_limit_too_big(session):
    row = unique("slice")
    session.write("all", row, {"c": "v"})
    with pytest.raises(InvalidRequest, match="slice limit must be at most 1000, got 1001"):
        session.slice("all", row, limit=1001)
    with pytest.raises(InvalidRequest, match="slice limit"):
        session.multi_read([ReadSpec("all", row), ReadSpec("all", row, limit=5000)])
    assert session.slice("all", row, limit=1000).columns == ["c"]
    still_works(session, unique("unused"), replicated=False)


def test_non_bytes_value_is_refused_client_side(session):
    with pytest.raises(TypeError, match="bytes or str"):
        session.write("all", unique("int"), {"c": 5})  # type: ignore[dict-item]


def test_not_replicated_group_without_auto_migrate(two_regions, client_for):
    session = client_for(two_regions).session("a", auto_migrate=False)
    row = unique("only-b")
    with pytest.raises(NotReplicatedHere) as info:
        session.write("only-b", row, {"c": "v"})
    assert (info.value.group, info.value.region) == ("only-b", "a")
    assert "only-b" in str(info.value) and "replicas: b" in str(info.value)
    with pytest.raises(NotReplicatedHere):
        session.read("only-b", row)
    with pytest.raises(NotReplicatedHere):
        session.multi_read([ReadSpec("all", row), ReadSpec("only-b", row)])
    assert session.region == "a"
    still_works(session, unique("unused"))
    reader = client_for(two_regions).session("b")
    assert len(reader.read("only-b", row)) == 0  # nothing got to b's copy either


def test_migrate_to_unknown_region(session):
    with pytest.raises(UnknownRegion, match="nowhere"):
        session.migrate("nowhere")
    with pytest.raises(UnknownRegion):
        session.client.session("nowhere")
    assert session.region == "a"
    still_works(session, unique("unused"), replicated=False)


def test_server_refuses_migration_to_a_region_it_does_not_know(two_regions, session):
    """A client with a stale region list: the server's NOT_FOUND becomes UnknownRegion."""
    real = session.client.region("a")
    stale = CausalClient([real, RegionInfo("ghost", real.site, real.endpoint)])
    try:
        ghostly = stale.session("a")
        with pytest.raises(UnknownRegion, match="unknown region 'ghost'"):
            ghostly.migrate("ghost")
        assert ghostly.region == "a"
    finally:
        stale.close()
    still_works(session, unique("unused"), replicated=False)


def test_session_with_an_unknown_gear_in_its_label(two_regions, client_for):
    client = client_for(two_regions)
    with pytest.raises(InvalidLabel, match="unknown source gear 'zz/0'"):
        client.session("a", label=Label(ts=5, src="zz/0"))
    with pytest.raises(InvalidLabel, match="future"):
        client.session("b", label=Label(ts=int((time.time() + 3600) * 1e6), src="b/0"))


# -- raw gRPC: what another client could send -------------------------------------------------------
def hour_ahead_us() -> int:
    return int((time.time() + 3600) * 1e6)


BAD_LABELS = [
    pytest.param(lambda: store_pb2.Label(ts=-1, src="a/0"), "timestamp must be >= 0", id="negative-ts"),
    pytest.param(lambda: store_pb2.Label(ts=5, src="a0"), "source must look like", id="src-without-slash"),
    pytest.param(lambda: store_pb2.Label(ts=5, src=""), "source must look like", id="ts-without-src"),
    pytest.param(lambda: store_pb2.Label(ts=5, src="zz/0"), "unknown source gear 'zz/0'", id="unknown-gear"),
    pytest.param(lambda: store_pb2.Label(ts=5, src="a/1"), "unknown source gear 'a/1'", id="unknown-shard"),
    pytest.param(lambda: store_pb2.Label(ts=hour_ahead_us(), src="a/0"), "in the future", id="hour-ahead"),
    pytest.param(lambda: store_pb2.Label(ts=5, src="a/0", type=9), "unknown label type 9", id="bad-type"),
    pytest.param(
        lambda: store_pb2.Label(ts=5, src="a/0", target="t" * 513), "target longer", id="long-target"
    ),
]


@pytest.mark.parametrize(("make_label", "reason"), BAD_LABELS)
def test_garbage_labels_over_raw_grpc(stub, session, make_label, reason):
    row = unique("raw-label")
    label = make_label()
    calls = [
        (stub.Write, store_pb2.WriteRequest(label=label, mutation=good_mutation(row))),
        (stub.Batch, store_pb2.BatchRequest(label=label, mutations=[good_mutation(row)])),
        (stub.Read, store_pb2.ReadRequest(label=label, op=store_pb2.ReadOp(group="all", row=row))),
        (
            stub.MultiRead,
            store_pb2.MultiReadRequest(label=label, ops=[store_pb2.ReadOp(group="all", row=row)]),
        ),
        (stub.Attach, store_pb2.AttachRequest(label=label)),
        (stub.Migrate, store_pb2.MigrateRequest(label=label, target_region="b")),
    ]
    for call, request in calls:
        error = rpc_error(call, request)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (call, error)
        assert error.details().startswith("label: ") and reason in error.details(), error.details()
    still_works(session, row)


def test_label_a_little_ahead_is_accepted_over_raw_grpc(stub, session):
    row = unique("raw-ok")
    ahead = int((time.time() + 5) * 1e6)
    reply = stub.Write(
        store_pb2.WriteRequest(label=store_pb2.Label(ts=ahead, src="b/0"), mutation=good_mutation(row)),
        timeout=scaled(5),
    )
    assert reply.label.ts > ahead and reply.label.src == "a/0"
    assert session.read("all", row).text("c") == "v"


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        pytest.param(store_pb2.ColumnOp(column="c"), "no operation", id="no-op-kind"),
        pytest.param(store_pb2.ColumnOp(column="c", delete=False), "delete must be true", id="delete-false"),
        pytest.param(
            store_pb2.ColumnOp(column="", set=b"v"), "column name must not be empty", id="no-column"
        ),
    ],
)
def test_malformed_column_ops_over_raw_grpc(stub, session, op, reason):
    row = unique("raw-op")
    mutation = store_pb2.Mutation(group="all", row=row, ops=[store_pb2.ColumnOp(column="ok", set=b"1"), op])
    error = rpc_error(stub.Write, store_pb2.WriteRequest(mutation=mutation))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and reason in error.details()
    still_works(session, row)


def test_columns_and_slice_together_over_raw_grpc(stub, session):
    op = store_pb2.ReadOp(group="all", row="r", columns=["c"], slice=store_pb2.Slice(limit=3))
    error = rpc_error(stub.Read, store_pb2.ReadRequest(op=op))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "not both" in error.details()
    still_works(session, unique("unused"), replicated=False)


def test_write_without_a_mutation_over_raw_grpc(stub, session):
    error = rpc_error(stub.Write, store_pb2.WriteRequest())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "group must not be empty" in error.details()
    still_works(session, unique("unused"), replicated=False)


def test_migrate_to_unknown_region_over_raw_grpc(stub, session):
    error = rpc_error(stub.Migrate, store_pb2.MigrateRequest(target_region="zz"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "unknown region 'zz'" in error.details()
    error = rpc_error(stub.Migrate, store_pb2.MigrateRequest(target_region=""))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    still_works(session, unique("unused"), replicated=False)


def test_not_replicated_over_raw_grpc(stub, session, client_for, two_regions):
    row = unique("raw-only-b")
    request = store_pb2.WriteRequest(mutation=Mutation("only-b", row).set("c", "v").to_proto())
    error = rpc_error(stub.Write, request)
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error.details().startswith("not-replicated:only-b:a:")
    still_works(session, unique("unused"), replicated=False)
    assert len(client_for(two_regions).session("b").read("only-b", row)) == 0
