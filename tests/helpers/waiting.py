"""Waiting for a condition, keys no other test uses, and what a causality check must find."""

from __future__ import annotations

import time
from collections.abc import Callable

from helpers.http_browser import poll


def expect_caught(protocol: str, failures: int, rounds: int, what: str) -> None:
    """A causal protocol: no failure at all. Eventual: at least one, or the check cannot catch
    anything."""
    if protocol == "eventual":
        assert failures >= 1, f"eventual: {what} never broken in {rounds} rounds; the test cannot fail"
    else:
        assert failures == 0, f"{protocol}: {what} broken in {failures} of {rounds} rounds"


def eventually(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.01):
    """Polls until ``predicate()`` is truthy; returns its value or fails with a clear message."""
    return poll(predicate, timeout, "condition", interval)


def unique(prefix: str) -> str:
    """A key no other test uses (tests share module-scoped clusters)."""
    return f"{prefix}-{time.monotonic_ns()}"
