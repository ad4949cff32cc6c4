"""Plain values the client library hands out and takes in: rows, cells, pages, mutations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from causal_client.label import Label
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
        return Row(msg.group, msg.row, cells, msg.next_cursor or None)

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
    ops: list[store_pb2.ColumnOp] = field(default_factory=list)

    def set(self, column: str, value: Value) -> Mutation:
        self.ops.append(store_pb2.ColumnOp(column=column, set=_as_bytes(value)))
        return self

    def update(self, values: Mapping[str, Value]) -> Mutation:
        for column, value in values.items():
            self.set(column, value)
        return self

    def delete(self, *columns: str) -> Mutation:
        for column in columns:
            self.ops.append(store_pb2.ColumnOp(column=column, delete=True))
        return self

    def increment(self, column: str, amount: int = 1) -> Mutation:
        self.ops.append(store_pb2.ColumnOp(column=column, increment=amount))
        return self

    def to_proto(self) -> store_pb2.Mutation:
        return store_pb2.Mutation(group=self.group, row=self.row, ops=self.ops)


@dataclass(frozen=True)
class ReadSpec:
    """One read of a batch: named columns, a slice (``limit`` set), or the whole row."""

    group: str
    row: str
    columns: tuple[str, ...] = ()
    limit: int | None = None
    after: str | None = None
    reverse: bool = True

    def to_proto(self) -> store_pb2.ReadOp:
        op = store_pb2.ReadOp(group=self.group, row=self.row, columns=self.columns)
        if self.limit is not None:
            op.slice.CopyFrom(store_pb2.Slice(after=self.after or "", limit=self.limit, reverse=self.reverse))
        return op
