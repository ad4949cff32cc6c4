"""A visibility budget: where a remote update's time went between its write at the origin and
its visibility at the destination, pair by pair, from the stage ages every process on the path
records for the same sampled updates (services/labelpath/stages.py).

For a pair (origin, destination) on Saturn's tree, the path is the origin's label pump, then
each serializer between the two regions, then the destination's remote proxy; the payload
travels beside it on the bulk link. A budget splits the mean visibility of the sampled updates:

- ``sink``: from the write to the sink's send (reading the stream, merging the shards);
- ``tree lag``: the tree's configured latency on that path (links plus edge delays);
- ``tree own``: what the tree took beyond its lag (every hop's wake-up, encoding, queueing);
- ``after label``: from the label's arrival to visibility (waiting for the payload, or for
  labels ahead of it, and the apply).

Saturn's own overhead (``overhead``) is what the pair's visibility adds to what its configured
lags force: visible minus the later of the bulk lag and the tree lag. Protocols without a tree
have ``payload`` and ``visible`` only (the wait for stabilization is their difference).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.harness.metrics import parse_histograms
from loadtest.harness.plots import plt, save
from loadtest.harness.report import num, render_table
from loadtest.harness.stats import Histogram, to_ms
from services.topology import Topology

STAGE_METRIC = "causal_label_stage_seconds"
Key = tuple[str, str, str]  # (node, origin, stage)
Stages = dict[Key, Histogram]


def parse_stages(text: str) -> Stages:
    """The stage histograms in one region's /metrics page (a serializer's are served by the
    region at its site)."""
    return parse_histograms(text, STAGE_METRIC, ("node", "origin", "stage"))  # type: ignore[return-value]


def since(now: Stages, then: Stages) -> Stages:
    return {key: histogram.minus(then.get(key)) for key, histogram in now.items()}


Value = Callable[["Budget"], float | None]  # a column of a budget's table


def first(*values: float | None) -> float | None:
    """The first value that is there (a stage per destination, else the stage for all)."""
    return next((v for v in values if v is not None), None)


def less(a: float | None, b: float | None) -> float | None:
    """a - b, or None where either is missing (a stage no sampled update passed)."""
    return None if a is None or b is None else a - b


@dataclass
class Hop:
    """One tree link on the path: written at ``a`` after the link's lag, taken at ``b``."""

    a: str
    b: str
    lag_ms: float  # configured: WAN latency plus the edge's delay
    written_ms: float | None  # mean age when a's link wrote it
    taken_ms: float | None  # mean age when b took it


@dataclass
class Budget:
    protocol: str
    origin: str
    region: str
    sampled: int  # updates sampled at the destination
    bulk_lag_ms: float
    tree_lag_ms: float | None  # None without a tree
    read_ms: float | None
    sent_ms: float | None
    label_ms: float | None
    payload_ms: float | None
    visible_ms: float | None
    hops: list[Hop] = field(default_factory=list)

    @property
    def tree_own_ms(self) -> float | None:
        return less(less(self.label_ms, self.sent_ms), self.tree_lag_ms)

    @property
    def after_label_ms(self) -> float | None:
        return less(self.visible_ms, self.label_ms)

    @property
    def extra_ms(self) -> float | None:
        return less(self.visible_ms, self.bulk_lag_ms)

    @property
    def overhead_ms(self) -> float | None:
        """Visibility beyond what the configured lags force: the later of the payload's bulk
        lag and the label's tree lag. Saturn's own price (the sink, the tree's hops, the proxy)."""
        if self.visible_ms is None:
            return None
        forced = max(self.bulk_lag_ms, self.tree_lag_ms or 0.0)
        return self.visible_ms - forced


def budgets(topology: Topology, stages: Stages) -> list[Budget]:
    """A budget per ordered pair of regions, from stage histograms measured over one phase."""

    def mean(node: str, origin: str, stage: str) -> float | None:
        histogram = stages.get((node, origin, stage))
        return to_ms(histogram.mean) if histogram is not None else None

    out = []
    for origin in topology.region_names:
        for region in topology.region_names:
            if origin == region:
                continue
            path = topology.tree_path(origin, region) if topology.traits.tree else []
            hops = [
                Hop(a, b, topology.link_latency_ms(a, b), mean(a, origin, f"out:{b}"),
                    mean(b, origin, "label" if b == region else "in"))
                for a, b in itertools.pairwise(path)
            ]  # fmt: skip
            visible = stages.get((region, origin, "visible"))
            out.append(
                Budget(
                    protocol=topology.protocol,
                    origin=origin,
                    region=region,
                    sampled=int(visible.count) if visible is not None else 0,
                    bulk_lag_ms=topology.region_latency_ms(origin, region),
                    tree_lag_ms=sum(h.lag_ms for h in hops) if hops else None,
                    read_ms=mean(origin, origin, "read"),
                    sent_ms=first(mean(origin, origin, f"sent:{region}"), mean(origin, origin, "sent")),
                    label_ms=mean(region, origin, "label") if hops else None,
                    payload_ms=mean(region, origin, "payload"),
                    visible_ms=mean(region, origin, "visible"),
                    hops=hops,
                )
            )
    return out


def over_updates(rows: list[Budget], value: Value) -> float | None:
    """The mean of ``value`` over the pairs, each weighing its sampled updates."""
    weighed = [(row.sampled, v) for row in rows if row.sampled and (v := value(row)) is not None]
    total = sum(n for n, _ in weighed)
    return sum(n * v for n, v in weighed) / total if total else None


def table(protocol: str, rows: list[Budget], baseline: Sequence[Budget] = ()) -> str:
    """The budget of every pair that made a sampled update visible, and the mean over updates.
    With ``baseline`` (eventual's budgets from the same run), the overhead beyond the baseline's
    own extra on that pair: what the protocol adds to a system that orders nothing."""
    shown = sorted((r for r in rows if r.sampled), key=lambda r: (r.origin, r.region))
    base = {(b.origin, b.region): b.extra_ms for b in baseline if b.sampled}
    columns: list[tuple[str, Value]] = [
        ("sink", lambda r: r.sent_ms),
        ("tree lag", lambda r: r.tree_lag_ms),
        ("tree own", lambda r: r.tree_own_ms),
        ("after label", lambda r: r.after_label_ms),
        ("payload", lambda r: r.payload_ms),
        ("bulk lag", lambda r: r.bulk_lag_ms),
        ("visible", lambda r: r.visible_ms),
        ("extra", lambda r: r.extra_ms),
        ("overhead", lambda r: r.overhead_ms),
    ]
    if base:
        columns.append(("over eventual's", lambda r: less(r.overhead_ms, base.get((r.origin, r.region)))))
    body = [[f"{r.origin}→{r.region}", str(r.sampled), *(num(get(r)) for _, get in columns)] for r in shown]
    body.append(["over updates", str(sum(r.sampled for r in shown)),
                 *(num(over_updates(shown, get)) for _, get in columns)])  # fmt: skip
    return render_table(
        f"{protocol}: where the visibility of sampled updates went (mean ms from the write; "
        "overhead = visible - the later of bulk lag and tree lag"
        + ("; over eventual's: overhead - eventual's extra on the pair)" if base else ")"),
        ["pair", "sampled", *(name for name, _ in columns)],
        body,
    )


def summary(rows: list[Budget]) -> str:
    """Per protocol, over updates: how late the payload came (over its bulk lag), how late the
    label came (over the sink's send and the tree's lag, a tree's protocol only), how long the
    update then waited to be visible, and its extra visibility."""
    protocols = list(dict.fromkeys(r.protocol for r in rows))
    columns: list[tuple[str, Value]] = [
        ("sink", lambda r: r.sent_ms),
        ("tree own", lambda r: r.tree_own_ms),
        ("payload over bulk lag", lambda r: less(r.payload_ms, r.bulk_lag_ms)),
        ("visible after payload", lambda r: less(r.visible_ms, r.payload_ms)),
        ("extra", lambda r: r.extra_ms),
    ]
    body = []
    for protocol in protocols:
        mine = [r for r in rows if r.protocol == protocol and r.sampled]
        sampled = str(sum(r.sampled for r in mine))
        body.append([protocol, sampled, *(num(over_updates(mine, get)) for _, get in columns)])
    return render_table(
        "where the time went, mean ms over sampled updates",
        ["protocol", "sampled", *(n for n, _ in columns)],
        body,
    )


def plot(protocol: str, rows: list[Budget], path: Path) -> Path:
    """A stacked bar per pair: sink, the tree's lag, its own time, after the label; the bulk
    lag as a tick (what eventual would show)."""
    shown = sorted(
        (r for r in rows if r.sampled and r.label_ms is not None), key=lambda r: (r.origin, r.region)
    )
    fig, axes = plt.subplots(figsize=(max(8.0, 0.32 * len(shown) + 2), 4.5))
    x = list(range(len(shown)))
    bottom = [0.0] * len(shown)
    parts = [
        ("sink", lambda r: r.sent_ms, "#8c8c8c"),
        ("tree lag (configured)", lambda r: r.tree_lag_ms, "#9ecae1"),
        ("tree's own time", lambda r: r.tree_own_ms, "#de2d26"),
        ("label to visible", lambda r: r.after_label_ms, "#31a354"),
    ]
    for name, get, colour in parts:
        heights = [max(0.0, get(r) or 0.0) for r in shown]
        axes.bar(x, heights, bottom=bottom, color=colour, label=name, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.scatter(
        x, [r.bulk_lag_ms for r in shown], marker="_", s=120, color="black", label="bulk lag", zorder=3
    )
    axes.set_xticks(x, [f"{r.origin[:3]}→{r.region[:3]}" for r in shown], rotation=90, fontsize=7)
    axes.set_ylabel("ms from the write")
    axes.set_title(f"{protocol}: where each pair's visibility goes (sampled updates)", fontsize=10)
    axes.legend(fontsize=8, loc="upper left")
    return save(fig, path)
