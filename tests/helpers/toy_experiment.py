"""An experiment that exists only for tests/test_experiments.py: one module with ``EXPERIMENT``,
registered by one entry, to show that the harness gives it options, help and exit codes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadtest.harness.experiment import FAILED, PASSED, BenchError, Experiment


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--outcome", choices=["pass", "fail", "cannot"], default="pass")


def run(args: argparse.Namespace) -> int:
    if args.outcome == "cannot":
        raise BenchError("the toy cannot run as asked")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "toy.json").write_text(json.dumps({"rounds": args.rounds, "protocols": args.protocols}))
    return PASSED if args.outcome == "pass" else FAILED


EXPERIMENT = Experiment(
    name="toy-experiment",
    summary="a toy",
    minutes=(0.1, 0.2),
    run=run,
    arguments=arguments,
    shared={"protocols": ("eventual", "saturn"), "rounds": 2, "out": None},
)
