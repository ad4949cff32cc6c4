"""The one retry helper the reconnecting loops share (services/runtime.py)."""

from __future__ import annotations

import pytest

from services.runtime import Backoff


def test_delays_grow_then_stay_at_the_last_and_start_over_after_a_success():
    backoff = Backoff((0.1, 0.5, 1.0))
    assert [backoff.next_delay() for _ in range(5)] == [0.1, 0.5, 1.0, 1.0, 1.0]
    backoff.reset()
    assert backoff.next_delay() == 0.1


@pytest.mark.parametrize("delays", [(), (0.1, -1.0)])
def test_a_backoff_without_delays_or_with_a_negative_one_is_refused(delays):
    with pytest.raises(ValueError, match="at least one delay, none negative"):
        Backoff(delays)
