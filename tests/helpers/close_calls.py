"""The suite's deadlines scaled to the machine, and its close calls reported (a pytest plugin,
registered by tests/conftest.py).

- At the start of the run the machine's slowdown is taken once (tests/helpers/deadlines.py) and
  every test's timeout (pytest-timeout's, from pyproject.toml or a test's own mark) is
  stretched by it, as every wait's deadline is.
- Each test reports the wait that used the largest share of its deadline (``deadlines.Use``),
  and how much of its own timeout the whole test used. The run ends with the tests that came
  closest, those over half of a deadline: tomorrow's flakes, visible today. The same table goes
  to ``test-artifacts/close-calls.txt``.

With pytest-xdist the workers' reports carry it to the controller (``user_properties``), which
prints it.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from helpers import deadlines

KEY = "close-call"
SHOWN = 20
HALF = 0.5


def timeout_of(item: pytest.Item) -> float | None:
    """The test's timeout in seconds before scaling: its own mark's, else the configuration's."""
    mark = item.get_closest_marker("timeout")
    if mark is not None and mark.args:
        return float(mark.args[0])
    if mark is not None and "timeout" in mark.kwargs:
        return float(mark.kwargs["timeout"])
    configured = item.config.getini("timeout")
    return float(configured) if configured else None


class CloseCalls:
    def __init__(self) -> None:
        self._spent: dict[str, float] = {}  # a test's seconds so far (setup, call, teardown)

    def pytest_configure(self, config: pytest.Config) -> None:
        deadlines.slowdown()  # measured here, by the run's first process, before workers start

    def pytest_report_header(self, config: pytest.Config) -> str:
        factor = deadlines.slowdown()
        return f"deadlines x{factor:.2f} ({deadlines.source}; {deadlines.SLOWDOWN_ENV}=<factor> sets it)"

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            base = timeout_of(item)
            if base:  # (prepended: it is the closest mark, the test's own one after it)
                item.add_marker(pytest.mark.timeout(deadlines.scaled(base)), append=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        spent = self._spent.get(item.nodeid, 0.0) + report.duration
        if call.when != "teardown":
            self._spent[item.nodeid] = spent
            return report
        self._spent.pop(item.nodeid, None)
        calls = []
        if (use := deadlines.take_closest()) is not None:
            calls.append([use.share, use.what, use.where, use.took_s, use.deadline_s])
        mark = item.get_closest_marker("timeout")
        if mark is not None and mark.args and mark.args[0]:
            limit = float(mark.args[0])
            calls.append([spent / limit, "the whole test, against its timeout", "", spent, limit])
        if calls:
            report.user_properties.append((KEY, max(calls)))
        return report

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        rows = []
        for reports in terminalreporter.stats.values():
            for report in reports:
                for key, value in getattr(report, "user_properties", ()):
                    if key == KEY:
                        rows.append((report.nodeid, *value))
        close = sorted((r for r in rows if r[1] > HALF), key=lambda r: -r[1])
        lines = [
            f"{share:4.0%} {took:6.1f} of {limit:6.1f} s  {nodeid}  ({what}{', ' + where if where else ''})"
            for nodeid, share, what, where, took, limit in close[:SHOWN]
        ]
        title = f"close calls: {len(close)} of {len(rows)} tests used over half of a deadline"
        terminalreporter.write_sep("=", f"{title} (deadlines x{deadlines.slowdown():.2f})")
        for line in lines:
            terminalreporter.write_line(line)
        folder = Path(config.rootpath) / "test-artifacts"
        folder.mkdir(exist_ok=True)
        (folder / "close-calls.txt").write_text(
            "\n".join([f"{title}; deadlines x{deadlines.slowdown():.2f}", *[
                f"{share:.3f}\t{took:.1f}\t{limit:.1f}\t{nodeid}\t{what}\t{where}"
                for nodeid, share, what, where, took, limit in close
            ]]) + "\n"
        )  # fmt: skip
