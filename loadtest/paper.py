"""The Saturn paper's figures, one command each: ``python -m loadtest paper FIG [--quick] [--out DIR]``.

A figure is an experiment of the registry (loadtest/harness/registry.py) that declares a
``Paper``: its module under loadtest/bench/ runs the paper's experiment scaled to this machine,
with progress, and writes its JSON and PNGs under ``DIR/FIG``; then this command sets the paper's
numbers beside ours (the module's ``compare``) and says, from the measured numbers, where the
shape matches and where it does not. ``all`` runs every figure there is.

The paper's numbers (Bravo, Rodrigues, Van Roy, EuroSys'17, §7), kept here so the comparison
needs nothing outside the repository:

- Fig. 1 (the problem, normalised to eventual consistency): (a) as datacenters are added (3 to 7)
  under full replication, GentleRain's throughput penalty stays small while its data staleness
  grows; Cure's staleness overhead stays low and constant while its throughput penalty is large
  (the y-axis reaches -20 %); (b) as the replication degree falls from 5 to 2, GentleRain's
  staleness overhead grows (the y-axis reaches 800 %): it cannot take advantage of partial
  replication. No exact numbers are printed; the comparison is of shapes.
- Fig. 4 (ec2-7region, configurations of Saturn): the generated M-configuration deviates 8.2 ms
  from the optimum on average; S (one serializer in Ireland) is as good as M for
  Ireland→Frankfurt and poor for Tokyo→Sydney; P (timestamp order) tends to the longest travel
  time (161 ms).
- Fig. 6 (N. California, Oregon, Ireland): +25 ms on the 10 ms N. California-Oregon link costs
  the best tree 14 ms of extra visibility; the other tree wins only past +55 ms.
- Fig. 7 (ec2-7region, the four protocols, the synthetic workload's defaults): extra visibility
  over eventual, on average over the updates, Saturn 7.3 ms, Cure 21.3 ms, GentleRain 97.9 ms;
  Saturn's 90th percentile extra is 7 ms for Ireland→Frankfurt (its best case) and 20.4 ms for
  Ireland→Sydney (its worst).
- Fig. 8 (the Facebook workload, maximum replicas 2 to 5): Saturn's throughput 1.8 % below
  eventual on average, 10.9 % above GentleRain's and 41.9 % above Cure's; extra visibility over
  eventual Saturn 16.1 ms, Cure 23.7 ms, GentleRain 79.2 ms.
- Fig. 5 (the synthetic workload, ec2-7region, one parameter swept at a time from 2-byte values,
  90:10 reads:writes, exponential correlation, no remote reads): Saturn's throughput 2.2 % below
  eventual on average, 4.8 % above GentleRain's and 24.7 % above Cure's (15.2 % under full
  replication); at 40 % remote reads 15.7 % above GentleRain's and 60.5 % above Cure's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from loadtest.harness import registry
from loadtest.harness.comparison import markdown
from loadtest.harness.experiment import Experiment
from loadtest.harness.report import render_table, say

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def figures() -> dict[str, Experiment]:
    """The experiments that compare themselves with a paper, by name."""
    return {e.name: e for e in registry.experiments() if e.paper}


def then(figure: Experiment) -> tuple[str, ...]:
    """The experiments a figure runs after its own (into the same folder)."""
    return figure.paper.then if figure.paper else ()


def add_parser(commands) -> None:
    paper = commands.add_parser(
        "paper", help="the Saturn paper's figures (and the companion papers'), with their numbers beside ours"
    )
    paper.add_argument("figure", choices=[*sorted(figures()), "all"])
    paper.add_argument("--quick", action="store_true", help="shorter phases (CI's smoke test)")
    paper.add_argument("--out", default=str(PROJECT_ROOT / "paper-results"), help="default: paper-results/")


def main(args: argparse.Namespace) -> int:
    known = figures()
    chosen = sorted(known) if args.figure == "all" else [args.figure]
    parts = [registry.experiment(part) for f in chosen for part in (f, *then(known[f]))]
    minutes = sum(part.minutes[0 if args.quick else 1] for part in parts)
    say(f"{', '.join(chosen)}{' (quick)' if args.quick else ''}: about {minutes:g} minutes on 2 cores")
    failed = []
    for name in chosen:
        figure = known[name]
        assert figure.paper is not None
        out = Path(args.out) / name
        out.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        say(f"== {name} → {out}")
        argv = [*(["--quick"] if args.quick else []), "--out", str(out)]
        if any(registry.run(part, argv) != 0 for part in (name, *then(figure))):
            failed.append(name)
            continue
        table, verdict = figure.paper.compare(out)
        for part in then(figure):
            follows = registry.experiment(part).comparison
            if follows is not None:
                rows, more = follows(out)
                table, verdict = [*table, *rows], f"{verdict}\n{more}"
        print(render_table(f"{name}: the paper and this run", ["what", "paper", "here"], table))
        print(verdict)
        (out / "comparison.md").write_text(markdown(name, table, verdict))
        say(f"{name} took {time.monotonic() - began:.0f} s; wrote {out / 'comparison.md'}")
    return 1 if failed else 0
