"""Where a label pump reads a shard's labels (``LabelSource``): the stream the gears append them
to (``gears.labels_stream``), read by the pump itself, or, with the sink in the bulk sender's
process, the sender's own tail of the bulk stream (``services/bulk/tail.py``'s ``TailLabels``).

A source gives labels as (ts, text) with the time they cover: every label of the shard at or
below it has been given (a stream's entries without a label, the bulk stream's entries of a
region without a tree, cover time too)."""

from __future__ import annotations

from typing import Protocol

from services.region import gears
from services.region.store import Shard

READ_COUNT = 1000  # entries per read at most
LABEL = gears.LABEL_FIELD.encode()  # an entry's label field
LabelEntry = tuple[int, bytes]  # (ts, the label's text: pump.parse_entry)


class LabelSource(Protocol):
    async def labels_after(self, after_ts: int, block_s: float) -> tuple[list[LabelEntry], int]:
        """The labels after ``after_ts`` and the time they cover, waiting up to ``block_s`` for
        an entry when there is none yet."""
        ...

    async def heartbeat_after(self, after_ts: int) -> tuple[int, list[LabelEntry]]:
        """A heartbeat of the shard (a time below which it makes no new label), with the labels
        after ``after_ts`` that it covers, in one round trip (``Shard.heartbeat_after``)."""
        ...


def labels_of(entries: list[tuple[int, dict[bytes, bytes]]]) -> list[LabelEntry]:
    return [(ts, fields[LABEL]) for ts, fields in entries if LABEL in fields]


class StreamLabels:
    """A shard's labels read by the pump itself from ``stream`` (a blocking read)."""

    def __init__(self, shard: Shard, stream: str) -> None:
        self.shard = shard
        self.stream = stream

    async def labels_after(self, after_ts: int, block_s: float) -> tuple[list[LabelEntry], int]:
        entries = await self.shard.stream_after(self.stream, after_ts, READ_COUNT, block_s=block_s)
        return labels_of(entries), entries[-1][0] if entries else after_ts

    async def heartbeat_after(self, after_ts: int) -> tuple[int, list[LabelEntry]]:
        covered, entries = await self.shard.heartbeat_after(self.stream, after_ts, READ_COUNT)
        return covered, labels_of(entries)
