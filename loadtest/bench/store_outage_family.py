"""The store-outage family's library (``store-restart``, ``store-failover``): a writer at a steady
pace around a store's crash, how long its shard refused writes and what it lost, and the table of
outages. Not an experiment: the family's experiments share it."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

from causal_client import CausalClient, ReadSpec
from causal_client.errors import CausalError
from loadtest.harness.experiment import FAILED, PASSED
from loadtest.harness.report import render_table, write_rows

REGION = "a"
GROUP = "all"
WRITE_EVERY_S = 0.005  # the writer's pace around the crash
CLIENT_TIMEOUT_S = 1.0  # a refused or unanswered write is tried again after at most this


@dataclass
class Outage:
    unavailable_s: float  # from the crash to the first write acknowledged after it
    failed_writes: int  # writes refused or unanswered meanwhile
    acknowledged: int  # writes acknowledged around the crash
    lost: int  # of those, missing afterwards


def crash_and_write(
    client: CausalClient, crash: Callable[[], None], row_name: Callable[[int], str], around_s: float
) -> Outage:
    """Writes rows (``row_name(i)``: on the shard the crash hits) at a steady pace for
    ``around_s``, crashes, writes on until writes have been acknowledged again for ``around_s``;
    then reads back every acknowledged row."""
    session = client.session(REGION)
    acknowledged: list[str] = []
    failed, killed_at, back_at = 0, None, None
    deadline = time.monotonic() + around_s
    i = 0
    while True:
        now = time.monotonic()
        if killed_at is None and now >= deadline:
            crash()
            killed_at = time.monotonic()
        if back_at is not None and now - back_at >= around_s:
            break
        if killed_at is not None and now - killed_at > 60:
            break  # never came back: reported as unavailable for the whole minute
        row = row_name(i)
        try:
            session.write(GROUP, row, {"v": b"y"})
            acknowledged.append(row)
            if killed_at is not None and back_at is None:
                back_at = time.monotonic()
        except CausalError:
            failed += 1
            session = client.session(REGION, label=session.token)  # a fresh session, the same past
        i += 1
        time.sleep(WRITE_EVERY_S)
    reader = client.session(REGION, label=session.token)
    lost = 0
    for start in range(0, len(acknowledged), 100):
        part = acknowledged[start : start + 100]
        rows = reader.multi_read([ReadSpec(GROUP, r, ("v",)) for r in part])
        lost += sum(1 for row in rows if "v" not in row)
    unavailable = (back_at or time.monotonic()) - (killed_at or time.monotonic())
    return Outage(unavailable, failed, len(acknowledged), lost)


def report_outages(
    out: str, name: str, title: str, heads: list[str], cells: list[list[str]], rows: list
) -> int:
    """The table of outages (``rows``: each with Outage's fields; ``cells``: each row's first
    columns, under ``heads``), written as JSON too; FAILED when one lost an acknowledged write."""
    print(render_table(
        title, [*heads, "writes refused for s", "refused writes", "acknowledged", "lost"],
        [[*first, f"{r.unavailable_s:.2f}", str(r.failed_writes), str(r.acknowledged), str(r.lost)]
         for first, r in zip(cells, rows, strict=True)],
    ))  # fmt: skip
    write_rows(out, name, rows)
    return FAILED if any(r.lost for r in rows) else PASSED


def add_around(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--around", type=float, default=1.0, help="seconds of writes before the crash and after the return"
    )
