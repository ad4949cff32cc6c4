"""Red operations ordered by a token, as Gemini orders them (RedBlue, OSDI'12 §6): the second way
to run strong operations (``[strong] mode = "token"``), beside Vivace's registers
(causal_client/strong.py), with the same API, so the two can be compared.

The regions hold the token in turn, ``token_hold_ms`` each (Gemini's prototype holds it up to a
second): slot ``n`` of the clock belongs to region ``n mod k`` of the sorted names. A red
operation at a region waits for that region's next slot, opens it if nobody did (it announces the
slot at every region, which from then on runs nothing of an older slot, and takes the numbered
operations it lacks from their answers: services/region/lua/red.lua), and runs at the region's own
store, numbered next. Reads are red too: only the holder is sure to have every operation.

What it costs, where Vivace's costs a round trip to a majority: nothing on the WAN while the
region holds the token, up to ``(k - 1) * token_hold_ms`` waiting for it otherwise, and one round
trip to every region per slot opened. What it cannot do: pass the token while any region is
unreachable (every region must hear of a slot before it opens). Gemini's token is not fault
tolerant either; red operations then fail with ``NoQuorum`` naming the silent regions, and blue
ones go on. Slots follow the clients' clocks only for when to try: a client whose clock is off
waits longer or is refused, never breaks the order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from causal_client import wire
from causal_client.commands import Command, check_value
from causal_client.errors import CausalError, Conflict, InvalidRequest, NoQuorum, OutcomeUnknown
from causal_client.label import Label
from causal_client.strong import (
    NO_PAST,
    ExecuteResult,
    Reaches,
    RegionCalls,
    Stored,
    StrongResult,
    check_names,
    text_of,
)

T = TypeVar("T")
MOVED, CHANGED = 0, 2  # red.lua's answers: the token is not here for this slot; the register moved on


class _TokenMoved(Exception):
    """A later slot was opened: this operation waits for its region's next one."""


class TokenRegisters(RegionCalls):
    """Token-ordered red registers for one client (module doc)."""

    def __init__(self, client: Reaches, hold_ms: float):
        super().__init__(client)
        self.ring = tuple(sorted(self.regions))
        self.hold_s = hold_ms / 1000
        self._opened: dict[str, int] = {}  # region -> the slot this client saw it open
        self._opening = threading.Lock()

    # -- the operations (the same as StrongRegisters') --------------------------------------------
    def write(self, local: str, namespace: str, key: str, value: str, past: Label | None = None) -> str:
        check_names(namespace, key)
        check_value(value)
        stored = Stored(value, past or NO_PAST)
        seq = self._red(local, lambda slot: self._put(local, slot, namespace, key, stored, ""))
        assert seq is not None  # nothing expected, nothing stale
        return red_ts(seq)

    def read(self, local: str, namespace: str, key: str) -> StrongResult:
        check_names(namespace, key)
        found, at = self._red(local, lambda slot: self._get(local, slot, namespace, key))
        return StrongResult(found.value, red_ts(at) if at else "", found.label)

    def execute(
        self, local: str, namespace: str, key: str, command: Command, past: Label | None = None
    ) -> ExecuteResult:
        check_names(namespace, key)
        if not isinstance(command, Command):
            raise InvalidRequest(
                f"execute takes a Command (causal_client.commands), not {type(command).__name__}"
            )

        def attempt(slot: int) -> ExecuteResult:
            while True:  # another client of this region may write the register between get and put
                current, at = self._get(local, slot, namespace, key)
                outcome = command.apply(current.value)
                stored = Stored(outcome.value, (past or NO_PAST).merge(current.label))
                seq = self._put(local, slot, namespace, key, stored, str(at))
                if seq is not None:
                    return ExecuteResult(outcome.applied, outcome.value, red_ts(seq), stored.label)

        return self._red(local, attempt)

    # -- the token -------------------------------------------------------------------------------
    def _red(self, local: str, operation: Callable[[int], T]) -> T:
        """Runs ``operation`` in one of ``local``'s slots, opened; ``Conflict`` if no slot of the
        region could be opened within a full turn of the token and the client's timeout."""
        self.client.region(local)
        deadline = time.monotonic() + len(self.ring) * self.hold_s * 2 + self.client.timeout
        over = -1  # a slot found over: the next one of the region's is after it
        while time.monotonic() < deadline:
            slot = self._next_slot(local, over + 1)
            try:
                if self._open(local, slot):
                    return operation(slot)
            except _TokenMoved:
                pass
            with self._opening:
                if self._opened.get(local) == slot:
                    del self._opened[local]
            over = slot
        raise Conflict(f"red operation at {local}: the token did not stay there long enough to run it")

    def _next_slot(self, local: str, earliest: int) -> int:
        """The slot of ``local`` now, or its next one (waited for), not before ``earliest``."""
        now = time.time()
        current = max(int(now / self.hold_s), earliest)
        mine = current + (self.ring.index(local) - current) % len(self.ring)
        if mine > current:
            time.sleep(max(0.0, mine * self.hold_s - time.time()))
        return mine

    def _open(self, local: str, slot: int) -> bool:
        """Whether ``local`` holds the token for ``slot``, opening it if this client did not see it
        open: the slot announced everywhere, the operations ``local`` lacks from the answers.
        False if a later slot was announced somewhere (this one is over)."""
        with self._opening:
            if self._opened.get(local) == slot:
                return True
        accepted, _, have, _ = _close_reply(self._call(local, wire.RED_CLOSE, [slot, ""]))
        if not accepted:
            return False
        others = [r for r in self.ring if r != local]
        answered, failed = self._gather(
            others,
            lambda r: _close_reply(self._call(r, wire.RED_CLOSE, [slot, have], meta=True)),
            lambda answers: len(answers) == len(others),
        )
        if len(answered) < len(others):
            silent = tuple(r for r in others if r not in answered)
            why = "; ".join(f"{r}: {failed[r]}" for r in silent if r in failed) or "no answer in time"
            raise NoQuorum(
                f"the red token cannot pass to {local}: every region must hear of it (Gemini's token is "
                f"not fault tolerant), and {', '.join(silent)} did not answer ({why})",
                missing=silent,
            )
        if not all(reply[0] for reply in answered.values()):
            return False
        entries: dict[int, bytes] = {}
        for _, _, _, theirs in answered.values():
            entries.update(theirs)
        trim = min([have, *(reply[2] for reply in answered.values())])
        flat: list = [slot, trim]
        for seq in sorted(entries):
            flat += [seq, entries[seq]]
        opened = self._call(local, wire.RED_OPEN, flat)
        if opened[0] != 1:
            return False
        with self._opening:
            self._opened[local] = slot
        return True

    # -- one region's calls ------------------------------------------------------------------------
    def _call(self, region: str, function: str, args: list, meta: bool = False) -> list:
        return self.client.call_at(region, lambda t: t.red_call(region, function, args, meta))

    def _get(self, local: str, slot: int, namespace: str, key: str) -> tuple[Stored, int]:
        reply = self._call(local, wire.RED_GET, [slot, namespace, key])
        if reply[0] == MOVED:
            raise _TokenMoved
        return Stored.decode(text_of(reply[1])) if reply[1] else Stored(None, NO_PAST), int(reply[2])

    def _put(
        self, local: str, slot: int, namespace: str, key: str, stored: Stored, expect: str
    ) -> int | None:
        """The next red operation at the holder: its number, or None (``expect`` was stale)."""
        try:
            reply = self._call(local, wire.RED_PUT, [slot, namespace, key, stored.encode(), expect])
        except CausalError as exc:
            if isinstance(exc, InvalidRequest):
                raise
            raise OutcomeUnknown(
                f"red register {namespace}/{key}: the write at {local} may or may not have landed ({exc})"
            ) from exc
        if reply[0] == MOVED:
            raise _TokenMoved
        return None if reply[0] == CHANGED else int(reply[1])


def red_ts(seq: int) -> str:
    """A red operation's place in the total order, as a timestamp string (ordered as text)."""
    return f"{seq:016d}.red"


def _close_reply(reply: list) -> tuple[bool, int, int, dict[int, bytes]]:
    accepted, fence, seq, *flat = reply
    entries = {int(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    return accepted == 1, int(fence), int(seq), entries
