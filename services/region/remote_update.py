"""A remote update as bulk transfer carries it and the gears apply it: its rows' changes, its
label's ts and source, the origin's time, and (Cure) the writer's vector; packed with msgpack,
unpacked and checked on arrival, and laid out as the apply, deliver and remote-stage gears read
their arguments."""

from __future__ import annotations

from dataclasses import dataclass, replace

import msgpack

from causal_client.label import merge_vectors, parse_vector
from services.region import gears


@dataclass(frozen=True, slots=True)
class RowChange:
    """What one update does to one row."""

    group: str
    row: str
    changes: tuple[gears.ColumnChange, ...]


@dataclass(frozen=True, slots=True)
class RemoteUpdate:
    """One payload as the origin gear packed it (see write.lua): one label, one or more rows
    (an atomic batch's), which become visible together."""

    ts: int
    src: str
    origin_time_us: int
    rows: tuple[RowChange, ...]
    #: Cure only (None otherwise): the writer's vector (per region, the greatest ts it had observed)
    deps: tuple[tuple[str, int], ...] | None = None

    @property
    def origin_region(self) -> str:
        return self.src.split("/", 1)[0]

    @property
    def key(self) -> str:
        """What names it in the remote proxy until its label comes: its label's "src|ts"."""
        return f"{self.src}|{self.ts}"

    @property
    def groups(self) -> set[str]:
        return {r.group for r in self.rows}

    def only(self, groups: set[str] | frozenset[str]) -> RemoteUpdate | None:
        """The update restricted to rows of ``groups`` (those replicated here), None if none is."""
        rows = tuple(r for r in self.rows if r.group in groups)
        if len(rows) == len(self.rows):
            return self
        return replace(self, rows=rows) if rows else None

    def pack(self) -> bytes:
        """As the write gear packs it (write.lua): ts, src, the origin's time, rows, [vector]."""
        rows = [[r.group, r.row, [[c.kind, c.column, c.arg] for c in r.changes]] for r in self.rows]
        fields: list = [self.ts, self.src, self.origin_time_us, rows]
        if self.deps is not None:
            fields.append(" ".join(f"{region}:{ts}" for region, ts in self.deps))
        return msgpack.packb(fields)

    @staticmethod
    def unpack(body: bytes) -> RemoteUpdate:
        ts, src, origin_time, rows, *rest = msgpack.unpackb(body, raw=True)
        changes = tuple(
            RowChange(
                g.decode(),
                r.decode(),
                tuple(gears.ColumnChange(k.decode(), c.decode(), a) for k, c, a in ops),
            )
            for g, r, ops in rows
        )
        deps = parse_vector(rest[0].decode()) if rest else None  # a vector under Cure (write.lua)
        return RemoteUpdate(ts, src.decode(), origin_time, changes, deps)


def deps_text(update: RemoteUpdate) -> str:
    """What ``deliver.lua`` merges into the row's dependencies: under Cure the writer's vector
    with the update's own entry; "" otherwise (nothing is kept)."""
    if update.deps is None:
        return ""
    return " ".join(f"{r}:{t}" for r, t in merge_vectors([update.deps, ((update.origin_region, update.ts),)]))


def rows_args(tag: str, update: RemoteUpdate, keys: list[str], args: list) -> None:
    """An update's rows as apply.lua and deliver.lua read them (n_rows, then per row n_ops and
    the ops; three keys per row, of the shard with hash tag ``tag``)."""
    args.append(len(update.rows))
    for row in update.rows:
        keys += gears.row_keys(tag, row.group, row.row)
        args += [len(row.changes), *gears.change_args(row.changes)]


def staged_rows(update: RemoteUpdate, rows: list[RowChange]) -> list:
    """A remote stage's tail (txn.lua): deps, n_rows, then per row group, row, n_ops, ops."""
    args: list = [deps_text(update), len(rows)]
    for row in rows:
        args += [row.group, row.row, len(row.changes), *gears.change_args(row.changes)]
    return args
