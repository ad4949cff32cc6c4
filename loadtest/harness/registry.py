"""Every experiment, by name: ``python -m loadtest bench NAME``, ``bench --list`` and
``python -m loadtest paper FIG`` read this one list. Registering an experiment is one line here
(its module under loadtest/bench/, which defines ``EXPERIMENT``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from functools import cache

from loadtest.harness import machine
from loadtest.harness.experiment import COULD_NOT_RUN, INTERRUPTED, BenchError, Experiment
from loadtest.harness.options import add_shared

# The modules of loadtest/bench/ that define an experiment, in the order --list shows them.
MODULES = (
    # the causal layer's price and the label path, piece by piece
    "throughput", "idle", "transport", "serializer", "proxy", "sink_placement",
    "bandwidth", "txn", "fractured", "resume", "page", "thread", "finding", "failover", "reconfigure",
    # a region's store across hosts (Redis Cluster)
    "replica_ack", "store_restart", "store_failover", "store_heal", "store_scaling",
    # the Saturn paper's figures
    "fig1", "fig4", "fig5", "fig6", "fig7", "fig8",
    # the companion papers
    "c3", "vivace", "vivace_strong", "strong", "redblue", "name_races", "synthetic",
    # the project's own instruments
    "checker",
)  # fmt: skip


class UnknownExperiment(KeyError):
    def __str__(self) -> str:
        return f"no experiment {self.args[0]!r} (python -m loadtest bench --list shows them)"


def _name_of(module: str) -> str:
    """An experiment's name: its module's last part, with hyphens."""
    return module.rpartition(".")[2].replace("_", "-")


def _modules() -> dict[str, str]:
    """Name → the module to import (an entry with a dot is a full module path: a test's toy)."""
    return {_name_of(m): m if "." in m else f"loadtest.bench.{m}" for m in MODULES}


@cache
def _load(module: str) -> Experiment:
    found = importlib.import_module(module).EXPERIMENT
    if not isinstance(found, Experiment):
        raise TypeError(f"{module}.EXPERIMENT is not an Experiment")
    return found


def experiment(name: str) -> Experiment:
    """The experiment called ``name`` (its module is imported only now)."""
    module = _modules().get(name)
    if module is None:
        raise UnknownExperiment(name)
    found = _load(module)
    if found.name != name:
        raise TypeError(f"{module} registers as {name!r} but calls its experiment {found.name!r}")
    return found


def names() -> list[str]:
    return list(_modules())


def experiments() -> list[Experiment]:
    return [experiment(name) for name in names()]


def parser_for(found: Experiment) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m loadtest bench {found.name}",
        description=found.about or found.summary,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_shared(parser, found.shared)
    found.arguments(parser)
    return parser


def run(name: str, argv: Sequence[str]) -> int:
    """Parses ``argv`` for experiment ``name`` and runs it: its own exit code, 2 when it could
    not run (an argparse error exits 2 as well), 130 when interrupted."""
    found = experiment(name)
    args = parser_for(found).parse_args(list(argv))
    try:
        where = machine.note()
        outcome = found.run(args)
        machine.keep(where, getattr(args, "out", None))
        return outcome
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return INTERRUPTED


def listing(markdown: bool = False) -> str:
    """Every experiment with what it measures and its expected minutes (quick / full)."""
    rows = [
        (e.name, f"{e.minutes[0]:g} / {e.minutes[1]:g}", e.summary + (" (paper)" if e.paper else ""))
        for e in experiments()
    ]
    if markdown:
        lines = ["| experiment | minutes, quick / full | what it measures |", "|---|---|---|"]
        return "\n".join([*lines, *(f"| `{n}` | {m} | {s} |" for n, m, s in rows)])
    width = max(len(n) for n, _, _ in rows)
    lines = [f"{'experiment':<{width}}  minutes (quick / full)  what it measures"]
    return "\n".join([*lines, *(f"{n:<{width}}  {m:^22}  {s}" for n, m, s in rows)])


def main(argv: Sequence[str]) -> int:
    """``python -m loadtest bench [--list [--markdown]] | NAME [options]``."""
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(
            "usage: python -m loadtest bench --list [--markdown] | NAME [options] (NAME --help: its own)\n\n"
            "Runs one experiment. Exit status: 0 passed, 1 a run failed or a target was missed, 2 could "
            "not run, 130 interrupted.\n\n" + listing()
        )
        return 0 if argv else COULD_NOT_RUN
    if argv[0] == "--list":
        print(listing(markdown="--markdown" in argv[1:]))
        return 0
    try:
        experiment(argv[0])
    except UnknownExperiment as exc:
        print(f"error: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    return run(argv[0], argv[1:])
