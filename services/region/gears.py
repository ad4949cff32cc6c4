"""The gears: a Redis Functions library that every shard's Redis runs, one call per operation.

Generating the label, writing the cells, and appending the payload and the label
(``labels_stream``) happen in one function so they are atomic (a crash can never leave a write
without its payload), and the checks a client's call must pass happen there too, before
anything is written, so that no caller can skip them. Key names, limits and error codes are
defined here (and in ``causal_client``) and handed to the Lua as constants: one definition for
both languages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from causal_client import wire
from causal_client.errors import GEAR_ERRORS
from causal_client.label import MAX_TARGET_BYTES
from services.traits import Traits

LUA_DIR = Path(__file__).with_name("lua")
LIBRARY = "saturn"
# The library's parts, in load order: helpers first, registrations last.
LUA_PARTS = (
    "common", "versions", "cells", "checks", "write", "txn", "read", "migrate", "attach", "claim",
    "strong", "red", "apply", "deliver", "heartbeat",  # what the region's own services call
    "library",
)  # fmt: skip

# Redis keys of a shard. Each is one of the names below with the shard's hash tag
# (``wire.shard_tag``) appended, and a gear call names that tag as its one key: the gears append
# it to each name (``enter_shard`` in the generated prelude), so one call touches one shard's
# keys, which share a hash slot, as a Redis Cluster requires.
GEAR_KEY = "gear"
OUTSIDE_ORDER_FIELD = "outside"  # in GEAR_KEY: "1" while labels made here must say so (proxy.py)
BULK_STREAM = "bulk"
LABEL_STREAM = "labels"
POSITION_KEY = "pos"
WATERMARK_KEY = "wm"  # saturn: origin region → greatest label ts delivered here in Saturn's order
#                       (on shard 0; other shards keep the greatest ts applied there, for exactly-once)
CLAIM_PREFIX = "claim:"  # strongly consistent claims decided here (never replicated): key → holder
SINK_POSITION_KEY = "sink_pos"  # saturn: the label sink's durable cursor in the stream it reads
TREE_KEY = "saturn:tree"  # saturn: the tree this region uses, and how far it has moved to it (epochs.py)
TREE_SEND_FIELD = "send"  # in TREE_KEY: the epoch whose tree the label sink must send on
TREE_EVENTS = "saturn:tree:events"  # a capped stream, an entry per change of TREE_KEY: the sink blocks on it
WATERMARK_EVENTS = "wm:events"  # saturn: a capped stream, one entry per raise of the watermarks
#                                 (on shard 0): waiting attaches block on it instead of polling
WATERMARK_EVENTS_MAXLEN = 1000
# c3, in WATERMARK_KEY beside the watermarks (services/c3/applier.py): per origin region, the
# greatest of its migration labels executed here (attaches wait on it), and this region's
# executing-operations clock (RoE), the dependency vector every label made here carries.
MIGRATED_PREFIX, ROE_PREFIX = "migrated:", "roe:"
# Stream entries (ids are the label's ts): a bulk entry's group and packed payload; a label entry.
GROUP_FIELD, PAYLOAD_FIELD, LABEL_FIELD = "g", "p", "l"
CONFIG_KEY = "saturn:config"  # the region's settings the gears check calls against (see checks.lua)
#: The shard's clock offset in µs (absent: none), added to the store's clock wherever a gear reads
#: it: the clock nemesis skews a region with it, as a wrong time server would (loadtest/check).
CLOCK_KEY = "saturn:clock"
MOVING_FIELD = "moving"  # in CONFIG_KEY while the shard moves between a cluster's masters: calls wait
GROUPS_KEY = "saturn:groups"  # group → its replicas, space-separated
GEARS_KEY = "saturn:gears"  # every gear's id (a label's source must be one)
DESCRIBE_KEY = "saturn:describe"  # what a client learns of the topology here (JSON)
STAGE_PREFIX = "stage:"  # a transaction's part staged here, invisible until settled (txn.lua)
STAGED_KEY = "txns:staged"  # the staged parts' ids by when they were staged (the sweeper's index)
DECISION_PREFIX = "txn:"  # at a transaction's coordinator shard: its decision (txn.lua)
DECISION_TTL_S = 86_400  # a decision is kept a day: the sweeper settles every part long before
ATTACH_WAITS_KEY = "saturn:attach_waits"  # attaches' waits, counted by the attach gear (attach.lua)
ATTACH_BUCKETS_S = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
STRONG_PREFIX = "strong:"  # a strong register's hash (strong.lua)
REPLICATED_KEY = "replicated"  # a counter a service bumps to wait for a cluster's replicas (store.py)
RED_TOKEN, RED_LOG, RED_PREFIX = "red:token", "red:log", "red:reg:"  # red operations (red.lua)
#: The names the gears use, by their name in the Lua.
SHARD_KEYS = {
    "GEAR_KEY": GEAR_KEY, "BULK_STREAM": BULK_STREAM, "LABEL_STREAM": LABEL_STREAM,
    "POSITION_KEY": POSITION_KEY, "WATERMARK_KEY": WATERMARK_KEY, "WATERMARK_EVENTS": WATERMARK_EVENTS,
    "CLAIM_PREFIX": CLAIM_PREFIX, "CONFIG_KEY": CONFIG_KEY, "GROUPS_KEY": GROUPS_KEY,
    "GEARS_KEY": GEARS_KEY, "DESCRIBE_KEY": DESCRIBE_KEY, "STAGE_PREFIX": STAGE_PREFIX,
    "STAGED_KEY": STAGED_KEY, "DECISION_PREFIX": DECISION_PREFIX, "ATTACH_WAITS_KEY": ATTACH_WAITS_KEY,
    "STRONG_PREFIX": STRONG_PREFIX, "RED_TOKEN": RED_TOKEN, "RED_LOG": RED_LOG, "RED_PREFIX": RED_PREFIX,
    "CLOCK_KEY": CLOCK_KEY,
}  # fmt: skip
ROW_KEY_PREFIXES = ("d:", "i:", "c:")  # a row's data hash, column index, counter hash (common.lua)


def labels_stream(traits: Traits) -> str:
    """The stream a region's labels are appended to. Under a tree (Saturn) each label rides in
    its write's bulk entry (a write that ships nothing, and a migration, get an entry of no
    group): the sink then reads what the bulk sender reads, one entry and one read per write
    (``labels_in_bulk`` in the gears' settings). C3's labels (attaches among them) keep a stream
    of their own."""
    return BULK_STREAM if traits.tree else LABEL_STREAM


def shard_key(name: str, tag: str) -> str:
    """One of a shard's keys: a name above with the shard's hash tag (``wire.shard_tag``)."""
    return name + tag


def row_keys(tag: str, group: str, row: str) -> list[str]:
    """The data hash, sorted column index and counter hash of one row of the shard with hash
    tag ``tag`` (as common.lua's: the tag right after the prefix)."""
    return [f"{prefix}{tag}{group}:{row}" for prefix in ROW_KEY_PREFIXES]


def _constants() -> dict[str, str | int | float | list]:
    names: dict[str, str | int | float | list] = {
        "WATERMARK_EVENTS_MAXLEN": WATERMARK_EVENTS_MAXLEN, "MIGRATED_PREFIX": MIGRATED_PREFIX,
        "GROUP_FIELD": GROUP_FIELD, "PAYLOAD_FIELD": PAYLOAD_FIELD, "LABEL_FIELD": LABEL_FIELD,
        "API": wire.GEARS_API, "OUTSIDE_ORDER_FIELD": OUTSIDE_ORDER_FIELD, "MOVING_FIELD": MOVING_FIELD,
        "ATTACH_BUCKETS_US": [round(b * 1e6) for b in ATTACH_BUCKETS_S],
        "MAX_KEY_BYTES": wire.MAX_KEY_BYTES, "MAX_OPS": wire.MAX_OPS,
        "MAX_SLICE": wire.MAX_SLICE, "MAX_ROW_COLUMNS": wire.MAX_ROW_COLUMNS,
        "DEFAULT_SLICE": wire.DEFAULT_SLICE, "MAX_FUTURE_S": wire.MAX_FUTURE_S,
        "MAX_TARGET_BYTES": MAX_TARGET_BYTES, "DECISION_TTL_S": DECISION_TTL_S,
        "RETAIN_US": wire.VERSIONS_KEPT_US,
    }  # fmt: skip
    return names | {f"CODE_{code}": code for code in GEAR_ERRORS}


def _lua_literal(value: str | int | float | list) -> str:
    if isinstance(value, list):
        return "{" + ", ".join(_lua_literal(v) for v in value) + "}"
    if isinstance(value, str):
        return repr(value) if "'" not in value else '"' + value + '"'
    return repr(value)


def _shard_prelude() -> str:
    """The shard's key names (unset until a call enters its shard) and ``enter_shard``, which
    names them for the shard whose tag a call's one key is. Functions share these locals (Lua
    upvalues), and a store runs one call at a time."""
    names = ", ".join(SHARD_KEYS)
    lines = [f"local SHARD, {names}", "local function enter_shard(tag)", "  SHARD = tag"]
    lines += [f"  {name} = {_lua_literal(value)} .. tag" for name, value in SHARD_KEYS.items()]
    return "\n".join([*lines, "end"])


@cache
def library_source() -> str:
    """The whole library, as ``FUNCTION LOAD`` takes it."""
    constants = "\n".join(f"local {name} = {_lua_literal(value)}" for name, value in _constants().items())
    prelude = constants + "\n" + _shard_prelude()
    parts = [(LUA_DIR / f"{part}.lua").read_text() for part in LUA_PARTS]
    header = f"#!lua name={LIBRARY}\n-- Generated from services/region/lua by services/region/gears.py"
    return "\n".join([header, prelude, *parts])


@dataclass(frozen=True, slots=True)
class ColumnChange:
    kind: str  # 's' set, 'd' delete, 'i' increment (local), 'p' partial sum (replicated)
    column: str
    arg: bytes | str | int = b""


def change_args(changes: tuple[ColumnChange, ...]) -> list:
    """The flattened (kind, column, arg) triples the apply/deliver functions read."""
    args: list = []
    for change in changes:
        args += [change.kind, change.column, change.arg]
    return args
