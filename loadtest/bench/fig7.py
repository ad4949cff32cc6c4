"""The paper's Fig. 7 on ec2-7region: ``python -m loadtest bench fig7 [--quick] [--out DIR]``.

Remote-update visibility of the four protocols on one data path (``visibility_figure.py``):
``eventual`` (the optimum: visible when the bulk link brings it), ``saturn`` on the generated tree
(ec2-7region-m.toml), ``gentlerain`` (global stable time) and ``cure`` (global stable vector). The
CDFs are the paper's two pairs: Ireland→Frankfurt, where Saturn's tree path is the link itself
(its best case), and Ireland→Sydney, where it is longest (its worst).
"""

from __future__ import annotations

from pathlib import Path

from loadtest.bench import visibility_figure
from loadtest.bench.visibility_figure import Configuration, Figure
from loadtest.harness.comparison import extra_by_configuration, pair, rows_of
from loadtest.harness.experiment import Paper
from loadtest.harness.plots import PROTOCOL_COLOURS
from loadtest.harness.report import num

TREE = "ec2-7region-m.toml"
FIGURE = Figure(
    name="fig7",
    title="Fig. 7, ec2-7region",
    configurations=[Configuration(p, TREE, p) for p in ("eventual", "saturn", "gentlerain", "cure")],
    pairs=[("ireland", "frankfurt"), ("ireland", "sydney")],
    colours=PROTOCOL_COLOURS,
)


# -- the paper's Fig. 7 beside this run (python -m loadtest paper fig7) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    rows = rows_of(out / "fig7.json")
    extra = extra_by_configuration(rows)
    over = {name: value - extra["eventual"] for name, value in extra.items()}

    def p90_over(protocol: str, origin: str, region: str) -> float:
        return (
            pair(rows, protocol, origin, region)["p90_ms"] - pair(rows, "eventual", origin, region)["p90_ms"]
        )

    table = [
        ["Saturn extra over eventual, mean of all pairs (ms)", "7.3", num(over["saturn"], sign=True)],
        ["Cure extra (ms)", "21.3", num(over["cure"], sign=True)],
        ["GentleRain extra (ms)", "97.9", num(over["gentlerain"], sign=True)],
        [
            "Saturn p90 extra, Ireland→Frankfurt (ms)",
            "7",
            num(p90_over("saturn", "ireland", "frankfurt"), sign=True),
        ],
        [
            "Saturn p90 extra, Ireland→Sydney (ms)",
            "20.4",
            num(p90_over("saturn", "ireland", "sydney"), sign=True),
        ],
    ]
    ordered = over["saturn"] < over["cure"] < over["gentlerain"]
    tenfold = over["gentlerain"] >= 10 * max(over["saturn"], 0.1)
    verdict = (
        f"Order Saturn < Cure < GentleRain {'holds' if ordered else 'does not hold'} "
        f"({num(over['saturn'])} / {num(over['cure'])} / {num(over['gentlerain'])} ms); GentleRain is "
        f"{'at least' if tenfold else 'less than'} 10 times Saturn's. GentleRain waits for the farthest "
        "region that ships here (its stable time is one scalar), Cure only for the regions an update "
        "depends on, Saturn for its label's path through the tree."
    )
    return table, verdict


EXPERIMENT = visibility_figure.experiment(
    FIGURE,
    "Saturn Fig. 7: visibility of eventual, Saturn, GentleRain and Cure on ec2-7region",
    minutes=(1.5, 2.5),
    about=__doc__ or "",
    paper=Paper(compare),
)
