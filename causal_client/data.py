"""Plain values the client library hands out and takes in: rows, cells, pages, mutations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from causal_client import wire
from causal_client.errors import InvalidRequest
from causal_client.label import Label, observed, parse_vector
from causal_client.proto import store_pb2

Value = bytes | str


def _as_bytes(value: Value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"values are bytes or str, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Cell:
    column: str
    value: bytes
    label: Label
    counter: int | None = None  # set for counter columns (the merged total)

    @property
    def text(self) -> str:
        return self.value.decode()


@dataclass(frozen=True, slots=True)
class Row:
    """The live columns of a row that a read returned, in column order."""

    group: str
    key: str
    cells: tuple[Cell, ...] = ()
    next_cursor: str | None = None  # for slices: pass as ``after`` to get the next page
    size: int = 0  # the row's live columns, all of them, whatever was read: a count of a set

    @staticmethod
    def from_proto(msg: store_pb2.RowResult) -> Row:
        cells = tuple(
            Cell(
                c.column,
                c.value,
                Label.from_proto(c.label),
                c.counter if c.is_counter else None,
            )
            for c in msg.cells
        )
        return Row(msg.group, msg.row, cells, msg.next_cursor or None, msg.size)

    @staticmethod
    def from_gear(group: str, key: str, reply: list, vectors: bool = False) -> tuple[Row, Label]:
        """A row from what the read gear returned for it (columns, cells, counters' partial
        sums, cursor), and the greatest label among its cells, tombstones included (a read
        that saw a delete has seen its label); with ``vectors`` (Cure), its vector covers them
        all."""
        # evt, lvt: when this state is valid (causal_client/transactions.py); deps: under Cure
        columns, raw_cells, partial_sums, cursor, size, _evt, _lvt, *deps = reply
        totals: dict[str, int] = {}
        for name, value in zip(partial_sums[::2], partial_sums[1::2], strict=True):
            column = name.split(b"|", 1)[1].decode()
            totals[column] = totals.get(column, 0) + int(value.rsplit(b"|", 1)[1])
        cells, best = [], Label.zero()
        for column, raw in zip(columns, raw_cells, strict=True):
            if raw is None:
                continue
            ts, src, flag, value = raw.split(b"|", 3)
            label = observed(int(ts), src.decode(), f"{group}/{key}", vectors)
            best = best.merge(label)
            if flag == b"t":
                continue
            name = column.decode() if isinstance(column, bytes) else column
            counter = totals.get(name, 0) if flag == b"c" else None
            cells.append(Cell(name, b"" if counter is not None else value, label, counter))
        next_cursor = cursor.decode() if isinstance(cursor, bytes) else cursor
        if vectors and deps and deps[0]:
            best = best.with_vector(parse_vector(deps[0].decode() if isinstance(deps[0], bytes) else deps[0]))
        return Row(group, key, tuple(cells), next_cursor or None, int(size)), best

    def to_proto(self) -> store_pb2.RowResult:
        result = store_pb2.RowResult(
            group=self.group, row=self.key, next_cursor=self.next_cursor or "", size=self.size
        )
        for c in self.cells:
            label = store_pb2.Label(ts=c.label.ts, src=c.label.src, target=c.label.target)
            if c.counter is not None:
                result.cells.add(column=c.column, label=label, is_counter=True, counter=c.counter)
            else:
                result.cells.add(column=c.column, value=c.value, label=label)
        return result

    def __iter__(self) -> Iterator[Cell]:
        return iter(self.cells)

    def __len__(self) -> int:
        return len(self.cells)

    def __contains__(self, column: object) -> bool:
        return any(c.column == column for c in self.cells)

    def cell(self, column: str) -> Cell | None:
        return next((c for c in self.cells if c.column == column), None)

    def get(self, column: str, default: bytes | None = None) -> bytes | None:
        cell = self.cell(column)
        return cell.value if cell else default

    def text(self, column: str, default: str | None = None) -> str | None:
        cell = self.cell(column)
        return cell.text if cell else default

    def counter(self, column: str) -> int:
        cell = self.cell(column)
        return cell.counter or 0 if cell else 0

    def as_dict(self) -> dict[str, bytes]:
        return {c.column: c.value for c in self.cells if c.counter is None}

    @property
    def columns(self) -> list[str]:
        return [c.column for c in self.cells]


@dataclass
class Mutation:
    """Changes to one row, applied atomically with one label. Chain ``set``/``delete``/``increment``."""

    group: str
    row: str
    ops: list[wire.ColumnOp] = field(default_factory=list)  # (kind 's'/'d'/'i', column, arg)

    def set(self, column: str, value: Value) -> Mutation:
        self.ops.append(("s", column, _as_bytes(value)))
        return self

    def update(self, values: Mapping[str, Value]) -> Mutation:
        for column, value in values.items():
            self.set(column, value)
        return self

    def delete(self, *columns: str) -> Mutation:
        for column in columns:
            self.ops.append(("d", column, b""))
        return self

    def increment(self, column: str, amount: int = 1) -> Mutation:
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError(f"an increment is an int, got {type(amount).__name__}")
        self.ops.append(("i", column, amount))
        return self

    def gear_args(self) -> list:
        return wire.mutation_args(self.group, self.row, self.ops)

    def increments(self) -> bool:
        """Whether it increments a counter (an atomic batch's coordinator shard is the one that does)."""
        return any(kind == "i" for kind, _, _ in self.ops)

    def to_proto(self) -> store_pb2.Mutation:
        ops = []
        for kind, column, arg in self.ops:
            if kind == "d":
                ops.append(store_pb2.ColumnOp(column=column, delete=True))
            elif isinstance(arg, int):  # an increment's amount
                ops.append(store_pb2.ColumnOp(column=column, increment=arg))
            else:
                ops.append(store_pb2.ColumnOp(column=column, set=_as_bytes(arg)))
        return store_pb2.Mutation(group=self.group, row=self.row, ops=ops)

    @staticmethod
    def from_proto(msg: store_pb2.Mutation) -> Mutation:
        """What a gateway received; an operation that is none of the three becomes one the gears
        refuse with its reason ("no operation")."""
        mutation = Mutation(msg.group, msg.row)
        for op in msg.ops:
            kind = op.WhichOneof("op")
            if kind == "set":
                mutation.ops.append(("s", op.column, op.set))
            elif kind == "increment":
                mutation.ops.append(("i", op.column, op.increment))
            elif kind == "delete":
                if not op.delete:
                    raise InvalidRequest(f"column {op.column!r}: delete must be true")
                mutation.ops.append(("d", op.column, b""))
            else:
                mutation.ops.append(("?", op.column, b""))
        return mutation


@dataclass(frozen=True)
class ReadSpec:
    """One read of a batch: named columns, a slice (``limit`` set), or the whole row."""

    group: str
    row: str
    columns: tuple[str, ...] = ()
    limit: int | None = None
    after: str | None = None
    reverse: bool = True

    @staticmethod
    def from_proto(msg: store_pb2.ReadOp) -> ReadSpec:
        if not msg.HasField("slice"):
            return ReadSpec(msg.group, msg.row, tuple(msg.columns))
        page = msg.slice
        return ReadSpec(msg.group, msg.row, tuple(msg.columns), page.limit, page.after, page.reverse)

    def gear_args(self) -> list:
        return wire.read_args(self.group, self.row, self.columns, self.limit, self.after or "", self.reverse)

    def to_proto(self) -> store_pb2.ReadOp:
        op = store_pb2.ReadOp(group=self.group, row=self.row, columns=self.columns)
        if self.limit is not None:
            op.slice.CopyFrom(store_pb2.Slice(after=self.after or "", limit=self.limit, reverse=self.reverse))
        return op
