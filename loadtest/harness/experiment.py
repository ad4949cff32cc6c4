"""What an experiment declares: its name, a line saying what it measures, the minutes it takes,
its own options, the options it shares with every other experiment, how it runs, and (for a
paper's figure) how its results compare with the paper's.

A new experiment is one module under loadtest/bench/ that defines ``EXPERIMENT`` and one line in
loadtest/harness/registry.py; ``python -m loadtest bench NAME`` then parses its options, runs it
and turns what goes wrong into the exit codes below.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Exit codes every experiment shares.
PASSED = 0  # ran, and met what it checks
FAILED = 1  # ran, and a run failed or a target was missed
COULD_NOT_RUN = 2  # bad arguments, or nothing could be measured (a port block, a missing binary)
INTERRUPTED = 130

Comparison = tuple[list[list[str]], str]  # rows (what, paper, here) and a verdict in sentences


class BenchError(RuntimeError):
    """The experiment cannot run as asked; the message says why (exit code 2)."""


@dataclass(frozen=True)
class Paper:
    """How an experiment's results read beside a paper's figure (``python -m loadtest paper``)."""

    compare: Callable[[Path], Comparison]  # reads the experiment's --out folder
    then: tuple[str, ...] = ()  # further experiments run into the same folder before comparing


@dataclass(frozen=True)
class Experiment:
    name: str  # as typed after ``python -m loadtest bench``
    summary: str  # one line: what it measures
    minutes: tuple[float, float]  # expected (quick, full) with the defaults, on a 2-core machine
    run: Callable[[argparse.Namespace], int]  # returns an exit code (PASSED, FAILED, ...)
    arguments: Callable[[argparse.ArgumentParser], None] = lambda parser: None  # its own options
    # The shared options it takes (loadtest/harness/options.py), each with its default here.
    shared: Mapping[str, object] = field(default_factory=dict)
    paper: Paper | None = None
    #: Its rows beside a paper's, where another experiment's figure runs it (``Paper.then``):
    #: ``python -m loadtest paper`` puts them after that figure's own.
    comparison: Callable[[Path], Comparison] | None = None
    about: str = ""  # the longer description ``--help`` prints (usually the module's docstring)
