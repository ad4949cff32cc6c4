"""How calls to a region's gears (the Redis Functions library its stores run) are spelled: the
API version both sides must speak, and the flat argument lists a label, a mutation or a read
becomes. One definition for every caller of the gears."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from causal_client.label import Label

# Raised when an argument list or a reply changes shape (2: labels carry a vector; 3: every read
# says its row's size; 4: transactions, reads as of a time, writes say whether they are atomic;
# 5: strong registers; 6: registers' reads; 7: every call names its shard by the shard's hash tag,
# its one key).
GEARS_API = "7"
# The functions a client calls (DESCRIBE: what any one region tells of the whole topology).
DESCRIBE = "saturn_describe"
WRITE, READ, MIGRATE = "saturn_write", "saturn_read", "saturn_migrate"
CHECK_WRITE = "saturn_check_write"  # a write's checks alone
READ_AT = "saturn_read_at"  # a read as of a time (a read-only transaction's later rounds)
STAGE, COMMIT, SETTLE = "saturn_stage", "saturn_commit", "saturn_settle"  # write-only transactions
TXN_CHECK = "saturn_check"  # a transaction's decision, asked at its coordinator
ATTACH, CLAIM = "saturn_attach", "saturn_claim"
# A strong register's phases at one replica (services/region/lua/strong.lua, causal_client/strong.py)
STRONG_PUT, STRONG_STAMP, STRONG_TS = "saturn_strong_put", "saturn_strong_stamp", "saturn_strong_ts"
STRONG_SET_TS, STRONG_DATA = "saturn_strong_set_ts", "saturn_strong_data"
RED_CLOSE, RED_OPEN = "saturn_red_close", "saturn_red_open"
RED_GET, RED_PUT = "saturn_red_get", "saturn_red_put"
VERSION = "saturn_version"  # the gears' API version, nothing checked: what a tool may ask first

# Limits the gears enforce (a client may check them first to fail without a round trip).
MAX_SHARDS = 64  # of a region
MAX_KEY_BYTES = 1024  # a row key, a column name
MAX_OPS = 1000  # mutations per batch, column operations per mutation, reads per call, columns per read
MAX_SLICE = 1000  # columns per page
DEFAULT_SLICE = 40
MAX_ROW_COLUMNS = 10_000  # a whole-row read of a wider row is refused: read it in slices
MAX_FUTURE_S = 60.0  # a label further ahead of the region's clock is refused as forged
#: Versions of rows are kept this long (services/region/lua/versions.lua): a read as of an earlier
#: time is refused, and a read-only transaction that would need one starts again.
VERSIONS_KEPT_US = 5_000_000
ATTACH_SLICE_S = 1.0  # an attach's blocked read of the watermark events lasts this at most

ColumnOp = tuple[str, str, bytes | str | int]  # kind ('s' set, 'd' delete, 'i' increment), column, arg


def label_args(label: Label) -> list:
    """type, ts, src, target, and the vector (``region:ts`` pairs; empty but under Cure)."""
    return [int(label.type), label.ts, label.src, label.target, label.vector_text()]


def mutation_args(group: str, row: str, ops: list[ColumnOp]) -> list:
    args: list = [group, row, len(ops)]
    for kind, column, arg in ops:
        args += [kind, column, arg]
    return args


def read_args(
    group: str, row: str, columns: tuple[str, ...] | list[str], limit: int | None, after: str, reverse: bool
) -> list:
    """Named columns; a slice when ``limit`` is set (0: the region's default page); else the
    whole row. Both columns and a slice is an error the gear reports."""
    page = [1, after, limit, int(reverse)] if limit is not None else [0, "", 0, 0]
    return [group, row, len(columns), *columns, *page]


def attach_args(label: Label, waited_s: float) -> list:
    """An attach's check: the label, and how long the attach has waited so far (counted by the
    region once the label's past is visible)."""
    return [GEARS_API, *label_args(label), max(0, round(waited_s * 1e6))]


def by_shard(rows: Iterable[tuple[str, str]], shards: int) -> dict[int, list[int]]:
    """Indexes of ``rows`` (group, row) per shard; none at all go to shard 0, whose gear
    refuses an empty call with its reason."""
    parts: dict[int, list[int]] = {}
    for i, (group, row) in enumerate(rows):
        parts.setdefault(shard_of(group, row, shards), []).append(i)
    return parts or {0: []}


def shard_of(group: str, row: str, shards: int) -> int:
    """Which of a region's shards holds a row (the gears check it with the same CRC-32)."""
    return 0 if shards == 1 else zlib.crc32(f"{group}/{row}".encode()) % shards


def shard_tag(shard: int) -> str:
    """The hash tag every key of shard ``shard`` carries, and the one key a gear call names:
    ``{s<shard>}``. A shard's keys therefore share a hash slot, so that a gear call is one
    slot's, as a Redis Cluster requires, and a shard moves between a cluster's masters whole
    (its slot is ``CLUSTER KEYSLOT {s<shard>}``). A standalone store ignores the tag."""
    return f"{{s{shard}}}"


#: MOVED replies one call follows (a shard moved again while the call was redirected), by clients
#: and services alike.
MOVES_FOLLOWED = 3


def node_after(nodes: Sequence[str], here: str) -> str:
    """The region's node after ``here`` (the first where ``here`` is none of them): where a
    shard is looked for once its master's connection is lost; it serves the shard if it was
    promoted, and names the master that does (MOVED) if not."""
    at = nodes.index(here) if here in nodes else -1
    return nodes[(at + 1) % len(nodes)]
