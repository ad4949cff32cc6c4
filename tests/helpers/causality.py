"""The question-and-answer round of the causality tests (test_saturn_causality.py, and on
congested links test_relay.py): x written in A, read in B and answered there with y; C must
never show y without x."""

from __future__ import annotations

import time

from causal_client import Session
from helpers.waiting import eventually, unique

POLL_S = 0.001


def visible(session: Session, row: str) -> bool:
    return len(session.read("all", row)) > 0


def wait_visible(session: Session, row: str, timeout: float = 10.0) -> float:
    """Polls until ``row`` is visible to ``session``; returns the monotonic time it was seen."""
    eventually(lambda: visible(session, row), timeout=timeout, interval=POLL_S)
    return time.monotonic()


def question_and_answer(writer: Session, relay: Session, observer: Session) -> tuple[bool, float]:
    """One round: x written in A, read in B, answered there with y; C waits for y and then looks
    for x. Returns (violation: y seen without x, seconds from x's write to y visible at C)."""
    x, y = unique("question"), unique("answer")
    started = time.monotonic()
    writer.write("all", x, {"text": "anyone?"})
    wait_visible(relay, x)
    relay.write("all", y, {"text": "yes!", "in-reply-to": x})
    seen_y = wait_visible(observer, y)
    violation = not visible(observer, x)
    return violation, seen_y - started
