"""The checker's end-of-run look at the replicas (loadtest/check/convergence.py), on a running
two-region cluster: an acknowledged write that one replica lost is found even when a later write
of the same key reached it (the value column then looks right: only the write's own column
tells), and the replicas' logs are compared."""

from __future__ import annotations

import pytest
import redis
from helpers.waiting import eventually, unique

from loadtest.check.convergence import check_convergence
from loadtest.check.history import History, Kind, Outcome
from loadtest.check.workload import VALUE_COLUMN, log_column
from services.region import gears

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def test_a_write_lost_behind_a_later_write_of_the_same_key_is_found(two_regions, client_for):
    cluster = two_regions
    t = cluster.topology
    client = client_for(cluster)
    group, row = "all", unique("log")
    history = History()
    session = client.session("a")
    for n in (1, 2, 3):
        value = f"0.{n}"
        label = session.write(group, row, {VALUE_COLUMN: value, log_column(value): ""})
        history.add(
            session=0, index=n, kind=Kind.WRITE, key=(group, row), value=value, outcome=Outcome.OK,
            region="a", start=0.0, end=0.0, label=(label.ts, label.src),
        )  # fmt: skip
    reader = client.session("b", label=session.token)
    eventually(
        lambda: reader.read(group, row, [VALUE_COLUMN]).text(VALUE_COLUMN) == "0.3",
        what="the last write at b",
    )
    # The middle write taken away at b behind the system's back, as a lost update would be.
    shard = t.shard_of("b", group, row)
    data, index, _ = gears.row_keys(t.shard_tag("b", shard), group, row)
    with redis.Redis.from_url(t.redis_url("b", shard)) as store:
        assert store.hdel(data, log_column("0.2")) == 1 and store.zrem(index, log_column("0.2")) == 1

    result = check_convergence(client, history, [(group, row)], t.group_members, say=print, timeout_s=10)

    assert result.lost == [f"{group}/{row}: 0.2 (acknowledged) missing at b"]
    assert not result.converged and any("b lacks 1" in line for line in result.diverged)
