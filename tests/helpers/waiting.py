"""Waiting for a condition, keys no other test uses, and what a causality check must find."""

from __future__ import annotations

import time
from collections.abc import Callable

from helpers.deadlines import wait_for


def expect_caught(protocol: str, failures: int, rounds: int, what: str) -> None:
    """A causal protocol: no failure at all. Eventual: at least one, or the check cannot catch
    anything."""
    if protocol == "eventual":
        assert failures >= 1, f"eventual: {what} never broken in {rounds} rounds; the test cannot fail"
    else:
        assert failures == 0, f"{protocol}: {what} broken in {failures} of {rounds} rounds"


def play_until_caught(
    protocol: str, missed: Callable[[], bool], what: str, rounds: int, eventual_rounds: int = 40
) -> None:
    """Plays a sequence (``missed()``: True when the guarantee broke) ``rounds`` times; under
    ``eventual``, until it broke once, up to ``eventual_rounds``: the anomaly needs a message still
    in flight, and on a busy machine a round can outlast it, so a fixed count may miss it by
    chance. A causal protocol must never break in ``rounds``."""
    eventual = protocol == "eventual"
    misses = played = 0
    while played < (eventual_rounds if eventual else rounds) and not (eventual and misses):
        misses += missed()
        played += 1
    expect_caught(protocol, misses, played, what)


def eventually(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    interval: float = 0.01,
    what: str = "",
    probe: bool = False,
):
    """Polls until ``predicate()`` is truthy; returns its value or fails with a clear message.
    ``timeout`` is the reference machine's (tests/helpers/deadlines.py scales it); a ``probe``
    that runs out is the test's finding, not a close call."""
    return wait_for(predicate, timeout, what or "condition", interval, probe)


def unique(prefix: str) -> str:
    """A key no other test uses (tests share module-scoped clusters)."""
    return f"{prefix}-{time.monotonic_ns()}"
