"""The paper's Fig. 4 on ec2-7region: ``python -m loadtest bench fig4 [--quick] [--out DIR]``.

Remote-update visibility for five ways of ordering remote updates (``visibility_family.py``): the
generated tree (M, ec2-7region-m.toml), the hand-made chain (ec2-7region.toml), one serializer in
Ireland (S, ec2-7region-s.toml), timestamp order without a tree (P: the chain's regions with every
serializer killed once running, so that every proxy orders by timestamp, §6.1), and the per-pair
optimum (``eventual``: an update is visible as soon as its bulk link has brought it). The CDFs are
the paper's two pairs, Ireland→Frankfurt and Tokyo→Sydney.
"""

from __future__ import annotations

import time
from pathlib import Path

from loadtest.bench import visibility_family
from loadtest.bench.visibility_family import Configuration, Figure
from loadtest.harness.cluster import BenchError
from loadtest.harness.comparison import extra_by_configuration, pair, rows_of
from loadtest.harness.experiment import Paper
from loadtest.harness.report import num
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


# -- the paper's Fig. 4 beside this run (python -m loadtest paper fig4) ----------------------------
def compare(out: Path) -> tuple[list[list[str]], str]:
    rows = rows_of(out / "fig4.json")
    extra = extra_by_configuration(rows)
    base = extra["optimum"]
    over = {name: value - base for name, value in extra.items()}
    ts = {name: pair(rows, name, "tokyo", "sydney")["mean_ms"] for name in extra}
    table = [
        ["M over the optimum, mean of all pairs (ms)", "8.2", num(over["M"], sign=True)],
        ["chain over the optimum (ms)", "(not in the paper)", num(over["chain"], sign=True)],
        ["S over the optimum (ms)", "much worse for T→S", num(over["S"], sign=True)],
        ["P over the optimum (ms)", "tends to 161 ms travel", num(over["P"], sign=True)],
        [
            "Tokyo→Sydney mean: M / S / P (ms)",
            "M ≪ S, P",
            f"{num(ts['M'])} / {num(ts['S'])} / {num(ts['P'])}",
        ],
    ]
    shape = over["M"] < over["S"] < over["P"] and ts["M"] < ts["S"]
    beats = "beats" if over["M"] < over["S"] else "does not beat"
    verdict = (
        f"Shape {'matches' if shape else 'differs'}: M {beats} "
        f"S, and P is {'the worst' if over['P'] >= max(over.values()) else 'not the worst'}; M deviates "
        f"{num(over['M'])} ms from the optimum against the paper's 8.2, because no tree of serializers at "
        "the seven regions' sites matches every pair's link under Table 1 (the generator's exact search "
        "finds 10.8 ms of mismatch in the model for the best one) and, with every region writing, a label "
        "that arrives before its payload holds back the labels behind it."
    )
    return table, verdict


EXPERIMENT = visibility_family.experiment(
    FIGURE,
    "Saturn Fig. 4: visibility with the generated tree M, one serializer S, timestamp order P, the optimum",
    minutes=(2.0, 3.0),
    about=__doc__ or "",
    paper=Paper(compare),
)
