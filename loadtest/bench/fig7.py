"""The paper's Fig. 7 on ec2-7region: ``python -m loadtest.bench.fig7 [--quick] [--out DIR]``.

Remote-update visibility of the four protocols on one data path (``visibility_figure.py``):
``eventual`` (the optimum: visible when the bulk link brings it), ``saturn`` on the generated tree
(ec2-7region-m.toml), ``gentlerain`` (global stable time) and ``cure`` (global stable vector). The
CDFs are the paper's two pairs: Ireland→Frankfurt, where Saturn's tree path is the link itself
(its best case), and Ireland→Sydney, where it is longest (its worst).
"""

from __future__ import annotations

import sys

from loadtest.bench import visibility_figure
from loadtest.bench.report import PROTOCOL_COLOURS
from loadtest.bench.visibility_figure import Configuration, Figure

TREE = "ec2-7region-m.toml"
FIGURE = Figure(
    name="fig7",
    title="Fig. 7, ec2-7region",
    configurations=[Configuration(p, TREE, p) for p in ("eventual", "saturn", "gentlerain", "cure")],
    pairs=[("ireland", "frankfurt"), ("ireland", "sydney")],
    colours=PROTOCOL_COLOURS,
)


def main(argv: list[str] | None = None) -> int:
    return visibility_figure.main(FIGURE, argv, (__doc__ or "").split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
