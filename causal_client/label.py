"""Saturn labels (paper §3): ``(type, src, ts, target)``, ordered by ``ts`` then ``src``.

A client's whole causal past is one label: the greatest it has observed. Keeping it small and
constant in size is the point of Saturn, so this is a frozen dataclass with a compact token form
that fits in a signed cookie. Under the `cure` baseline a label also carries a vector (per origin
region, the greatest ts of its updates the client has observed): empty under every other
protocol, where it costs nothing.
"""

from __future__ import annotations

import base64
import binascii
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import total_ordering
from typing import cast

from google.protobuf import unknown_fields

from causal_client.errors import InvalidLabel
from causal_client.proto import store_pb2

MAX_TARGET_BYTES = 512
MAX_VECTOR_ENTRIES = 64  # one per region
Vector = tuple[tuple[str, int], ...]  # (region, ts) pairs, sorted by region
# What ``to_token`` produces: URL-safe base64, padding stripped (tolerated if present).
_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9_-]+={0,2}")


class LabelType(enum.IntEnum):
    UPDATE = store_pb2.LABEL_UPDATE
    MIGRATION = store_pb2.LABEL_MIGRATION


@total_ordering
@dataclass(frozen=True, slots=True)
class Label:
    """One label. ``Label.zero()`` is the empty causal past (below every real label)."""

    ts: int
    src: str
    type: LabelType = LabelType.UPDATE
    target: str = ""
    vector: Vector = ()  # not part of the order (ts, src): only Cure reads it

    @staticmethod
    def zero() -> Label:
        return _ZERO

    @property
    def is_zero(self) -> bool:
        return self.ts == 0 and not self.src

    @property
    def region(self) -> str:
        """The region of the gear that made this label ("" for the zero label)."""
        return self.src.split("/", 1)[0]

    def sort_key(self) -> tuple[int, str]:
        return (self.ts, self.src)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Label):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Label):
            return NotImplemented
        return self.sort_key() == other.sort_key() and self.type == other.type

    def __hash__(self) -> int:
        return hash((self.ts, self.src, self.type))

    def as_past(self) -> Label:
        """This label as a position in the causal order only (same ts and src, no type, no
        target): presented in an attach, a region waits until every origin has passed it, never
        less. A migration label vouches for more, but only at its target (see Session)."""
        if self.type == LabelType.UPDATE:
            return self
        return Label(ts=self.ts, src=self.src, vector=self.vector)

    def merge(self, other: Label | None) -> Label:
        """The greater of two labels: how a client folds a returned label into its past; their
        vectors, if any, merged entry by entry (the greatest ts per region)."""
        if other is None:
            return self
        best = self if other <= self else other
        if self.vector or other.vector:
            merged = merge_vectors([self.vector, other.vector])
            if merged != best.vector:
                best = replace(best, vector=merged)
        return best

    def at_least(self, ts: int, src: str) -> Label:
        """The label as a write's gear reads it, its ts raised to ``ts`` (a time the session has
        read at: the write's ts goes above it). ``src`` stands in for a zero label's source."""
        if ts <= self.ts:
            return self
        return replace(self, ts=ts, src=self.src or src, type=LabelType.UPDATE)

    def with_vector(self, vector: Vector) -> Label:
        """This label with ``vector`` merged into its own."""
        return replace(self, vector=merge_vectors([self.vector, vector])) if vector else self

    def vector_text(self) -> str:
        """The vector as the gears read it: ``region:ts`` pairs separated by spaces."""
        return " ".join(f"{region}:{ts}" for region, ts in self.vector)

    # -- wire forms -------------------------------------------------------------------------
    def to_proto(self) -> store_pb2.Label:
        return store_pb2.Label(
            type=cast("store_pb2.LabelType", int(self.type)),
            src=self.src,
            ts=self.ts,
            target=self.target,
            vector=dict(self.vector),
        )

    @staticmethod
    def from_proto(msg: store_pb2.Label | None) -> Label:
        """Validates what came off the wire; raises :class:`InvalidLabel` with the reason."""
        if msg is None:
            return _ZERO
        if msg.ts < 0:
            raise InvalidLabel(f"label timestamp must be >= 0, got {msg.ts}")
        if msg.type not in (store_pb2.LABEL_UPDATE, store_pb2.LABEL_MIGRATION):
            raise InvalidLabel(f"unknown label type {msg.type}")
        vector = _checked_vector(msg.vector)
        if msg.ts == 0 and not msg.src:
            return Label(ts=0, src="", vector=vector) if vector else _ZERO
        if not msg.src or "/" not in msg.src:
            raise InvalidLabel(f"label source must look like 'region/shard', got {msg.src!r}")
        if len(msg.target.encode()) > MAX_TARGET_BYTES:
            raise InvalidLabel(f"label target longer than {MAX_TARGET_BYTES} bytes")
        return Label(ts=msg.ts, src=msg.src, type=LabelType(msg.type), target=msg.target, vector=vector)

    def to_token(self) -> str:
        """A URL-safe string (for cookies and hand-offs); ``from_token`` reverses it."""
        raw = self.to_proto().SerializeToString()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def from_token(token: str) -> Label:
        if not token:
            return _ZERO
        # b64decode silently drops characters outside the alphabet, and protobuf keeps fields
        # it does not know: either would turn garbage into a (zero) label, so both are refused.
        if not _TOKEN_PATTERN.fullmatch(token):
            raise InvalidLabel(f"not a label token: {token[:40]!r}")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            msg = store_pb2.Label.FromString(raw)
        except (binascii.Error, ValueError, Exception) as exc:  # protobuf raises DecodeError
            raise InvalidLabel(f"not a label token: {token[:40]!r}") from exc
        if len(unknown_fields.UnknownFieldSet(msg)):
            raise InvalidLabel(f"not a label token: {token[:40]!r}")
        return Label.from_proto(msg)

    def __str__(self) -> str:
        kind = "mig" if self.type == LabelType.MIGRATION else "upd"
        vector = f" [{self.vector_text()}]" if self.vector else ""
        return f"{kind}({self.ts}@{self.src or '-'}{' → ' + self.target if self.target else ''}{vector})"


_ZERO = Label(ts=0, src="")


def observed(ts: int, src: str, target: str = "", vectors: bool = False) -> Label:
    """The label of an update a client observed (a cell it read, a write it made); with
    ``vectors`` (Cure), carrying its own entry: its region's ts."""
    return Label(ts=ts, src=src, target=target, vector=((src.split("/", 1)[0], ts),) if vectors else ())


def merge_vectors(vectors: Iterable[Vector | Mapping[str, int]]) -> Vector:
    """The entry-by-entry maximum of several vectors."""
    best: dict[str, int] = {}
    for vector in vectors:
        for region, ts in vector.items() if isinstance(vector, Mapping) else vector:
            if ts > best.get(region, -1):
                best[region] = ts
    return tuple(sorted(best.items()))


def parse_vector(text: str) -> Vector:
    """A vector from its text form (``Label.vector_text``, as the gears keep it)."""
    pairs = (entry.partition(":") for entry in text.split())
    return merge_vectors([tuple((region, int(ts)) for region, _, ts in pairs)])


def _checked_vector(entries: Mapping[str, int]) -> Vector:
    if len(entries) > MAX_VECTOR_ENTRIES:
        raise InvalidLabel(f"a label's vector has at most {MAX_VECTOR_ENTRIES} entries")
    for region, ts in entries.items():
        if not region or not region.isprintable() or " " in region or ":" in region or ts < 0:
            raise InvalidLabel(f"bad vector entry {region!r}: {ts}")
    return tuple(sorted(entries.items()))


def max_label(labels: list[Label] | tuple[Label, ...]) -> Label:
    """The greatest of several labels (the zero label for none)."""
    best = _ZERO
    for label in labels:
        best = best.merge(label)
    return best
