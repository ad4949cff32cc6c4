"""The suite's deadlines (tests/helpers/deadlines.py) and its close-call report
(tests/helpers/close_calls.py): one factor stretches every deadline, a wait records the share of
its deadline it used, and a run lists the tests that came closest."""

from __future__ import annotations

import time

import pytest
from helpers import deadlines
from helpers.deadlines import Deadline, Use, scaled, wait_for

pytest_plugins = ["pytester"]


@pytest.fixture
def factor(monkeypatch):
    """Sets the factor as a person would (the variable), for this test only."""

    def set_to(value: str) -> None:
        monkeypatch.setenv(deadlines.SLOWDOWN_ENV, value)
        monkeypatch.setattr(deadlines, "_slowdown", None)

    yield set_to
    deadlines._slowdown = None  # (monkeypatch puts the variable back; the next read takes it)


def test_one_variable_stretches_every_deadline(factor):
    factor("2.5")
    assert deadlines.slowdown() == 2.5 and scaled(10) == 25.0
    assert Deadline(4, "x").seconds == 10.0


@pytest.mark.parametrize("given", ["fast", "0", "-1", "1000"])
def test_a_factor_that_is_not_one_is_refused_with_the_variables_name(factor, given):
    factor(given)
    with pytest.raises(ValueError, match=deadlines.SLOWDOWN_ENV):
        deadlines.slowdown()


def test_the_measured_factor_is_never_below_one_nor_above_the_cap():
    assert 1.0 <= deadlines.measure_slowdown(rounds=1) <= deadlines.MOST
    assert 0.0 <= deadlines.busy_elsewhere(0.05) <= 1.0


def test_a_wait_records_the_share_of_its_deadline_it_used(factor):
    factor("1")
    deadlines.take_closest()
    began = time.monotonic()
    found = wait_for(lambda: time.monotonic() - began > 0.3 and "there", 1.0, "the slow thing", 0.01)
    assert found == "there"
    wait_for(lambda: True, 1.0, "the quick thing")
    closest = deadlines.take_closest()
    assert closest is not None and closest.what == "the slow thing" and closest.met
    assert 0.3 <= closest.share < 0.9 and closest.where.startswith("test_deadlines.py:")
    assert deadlines.take_closest() is None  # taken: the next test starts afresh


def test_a_missed_deadline_says_what_and_how_long_and_counts_as_the_closest(factor):
    factor("2")
    with pytest.raises(AssertionError, match=r"the row at b: not within 0\.1 s \(0 s x2\.00\)"):
        wait_for(lambda: False, 0.05, "the row at b", 0.01)
    closest = deadlines.take_closest()
    assert closest is not None and not closest.met and closest.share >= 1.0
    assert Use("w", "f:1", 1.0, 0.0, True).share == 1.0  # (no deadline: counted as used up)


def test_a_probe_that_runs_out_is_a_finding_not_a_close_call(factor):
    factor("1")
    deadlines.take_closest()
    with pytest.raises(AssertionError, match="y at c"):
        wait_for(lambda: False, 0.05, "y at c", 0.01, probe=True)
    assert deadlines.take_closest() is None
    wait_for(lambda: True, 0.05, "y at c", 0.01, probe=True)  # one that is met counts as any wait
    assert deadlines.take_closest() is not None


def test_a_run_ends_with_its_close_calls_closest_first(pytester, factor):
    factor("1")
    pytester.makeconftest(
        "from helpers.close_calls import CloseCalls\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(CloseCalls(), 'close-calls')\n"
    )
    pytester.makepyfile(
        test_waits="""
        import time
        from helpers.deadlines import wait_for

        def test_close():
            began = time.monotonic()
            wait_for(lambda: time.monotonic() - began > 0.35, 0.5, "nearly late", 0.01)

        def test_far():
            wait_for(lambda: True, 10, "at once")
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:django")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "*close calls: 1 of 2 tests used over half of a deadline (deadlines x1.00)*",
        "*test_waits.py::test_close*(nearly late, test_waits.py:6)*",
    ])  # fmt: skip
    assert "test_far" not in result.stdout.str().split("close calls")[1]
    assert "test_close" in (pytester.path / "test-artifacts" / "close-calls.txt").read_text()
