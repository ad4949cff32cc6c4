"""The gears: Lua scripts that run inside a shard's Redis, one round trip per operation.

Generating the label, writing the cells, and appending to the bulk and label streams happen in
one script so they are atomic (a crash can never leave a write without its payload).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

LUA_DIR = Path(__file__).with_name("lua")

# Redis keys of a shard.
GEAR_KEY = "gear"
BULK_STREAM = "bulk"
LABEL_STREAM = "labels"
POSITION_KEY = "pos"
WATERMARK_KEY = "wm"  # saturn: origin region → greatest label ts delivered here in Saturn's order
#                       (on shard 0; other shards keep the greatest ts applied there, for exactly-once)
CLAIM_PREFIX = "claim:"  # strongly consistent claims decided here (never replicated): key → holder
SINK_POSITION_KEY = "sink_pos"  # saturn: the label sink's durable cursor in the label stream
WATERMARK_EVENTS = "wm:events"  # saturn: a capped stream, one entry per raise of the watermarks
#                                 (on shard 0): waiting attaches block on it instead of polling
SINK_WAKE_CHANNEL = "sink:wake"  # saturn: pub/sub; a migration label was written (the sink stops
#                                  lingering: a client is waiting for that label to travel)
WATERMARK_EVENTS_MAXLEN = 1000


def row_keys(group: str, row: str) -> list[str]:
    """The data hash, sorted column index and counter hash of one row."""
    return [f"d:{group}:{row}", f"i:{group}:{row}", f"c:{group}:{row}"]


@cache
def script_source(name: str) -> str:
    """A gear script with the shared helpers prepended (one copy of the LWW logic)."""
    common = (LUA_DIR / "common.lua").read_text()
    return common + "\n" + (LUA_DIR / f"{name}.lua").read_text()


@dataclass(frozen=True, slots=True)
class ColumnChange:
    kind: str  # 's' set, 'd' delete, 'i' increment (local), 'p' partial sum (replicated)
    column: str
    arg: bytes | str | int = b""


@dataclass(frozen=True, slots=True)
class RowChange:
    group: str
    row: str
    changes: tuple[ColumnChange, ...]
    replicate: bool = True


def write_args(
    client_ts: int, src: str, region: str, emit_label: bool, rows: list[RowChange]
) -> tuple[list[str], list]:
    keys: list[str] = [GEAR_KEY, BULK_STREAM, LABEL_STREAM]
    args: list = [client_ts, src, region, int(emit_label), len(rows)]
    for row in rows:
        keys += row_keys(row.group, row.row)
        args += [row.group, row.row, int(row.replicate), len(row.changes)]
        for change in row.changes:
            args += [change.kind, change.column, change.arg]
    return keys, args


def change_args(changes: tuple[ColumnChange, ...]) -> list:
    """The flattened (kind, column, arg) triples the apply/deliver scripts read."""
    args: list = []
    for change in changes:
        args += [change.kind, change.column, change.arg]
    return args


def read_args(columns: list[str], slice_after: str | None, limit: int, reverse: bool):
    if slice_after is not None:
        return ["slice", slice_after, limit, int(reverse)]
    if columns:
        return ["cells", *columns]
    return ["row", limit]
