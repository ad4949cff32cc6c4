"""The paper's Fig. 4 on ec2-7region: ``python -m loadtest.bench.fig4 [--quick] [--out DIR]``.

Remote-update visibility for five ways of ordering remote updates (``visibility_figure.py``): the
generated tree (M, ec2-7region-m.toml), the hand-made chain (ec2-7region.toml), one serializer in
Ireland (S, ec2-7region-s.toml), timestamp order without a tree (P: the chain's regions with every
serializer killed once running, so that every proxy orders by timestamp, §6.1), and the per-pair
optimum (``eventual``: an update is visible as soon as its bulk link has brought it). The CDFs are
the paper's two pairs, Ireland→Frankfurt and Tokyo→Sydney.
"""

from __future__ import annotations

import sys
import time

from loadtest.bench import visibility_figure
from loadtest.bench.harness import BenchError
from loadtest.bench.visibility_figure import Configuration, Figure
from services import plan


def without_tree(cluster, timeout: float = 15.0) -> None:
    """Kills every serializer and waits until every proxy orders by timestamp (P)."""
    for spec in plan.serializers(cluster.topology, cluster.layout):
        cluster.kill(spec.name)
    deadline = time.monotonic() + timeout
    while any(plan.proxy_in_tree_order(cluster.topology, r) for r in cluster.topology.region_names):
        if time.monotonic() > deadline:
            raise BenchError("the proxies did not fall back to timestamp order without their tree")
        time.sleep(0.1)


FIGURE = Figure(
    name="fig4",
    title="Fig. 4, ec2-7region",
    configurations=[
        Configuration("optimum", "ec2-7region.toml", "eventual"),
        Configuration("M", "ec2-7region-m.toml", "saturn"),
        Configuration("chain", "ec2-7region.toml", "saturn"),
        Configuration("S", "ec2-7region-s.toml", "saturn"),
        Configuration(
            "P", "ec2-7region.toml", "saturn", prepare=without_tree, note=", every serializer killed"
        ),
    ],
    pairs=[("ireland", "frankfurt"), ("tokyo", "sydney")],
    colours={"optimum": "#555555", "M": "#1f77b4", "chain": "#2ca02c", "S": "#ff7f0e", "P": "#d62728"},
)


def main(argv: list[str] | None = None) -> int:
    return visibility_figure.main(FIGURE, argv, (__doc__ or "").split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
