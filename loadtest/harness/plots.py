"""What every figure shares: matplotlib without a display, one colour per protocol (and per
variant and mode the experiments compare) so that a protocol looks the same in every figure, and
saving a figure the same way."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt

PROTOCOL_COLOURS = {
    "eventual": "#555555", "saturn": "#1f77b4", "gentlerain": "#d62728", "cure": "#ff7f0e", "c3": "#2ca02c",
    "saturn+serial": "#9ecae1", "c3+serial": "#98df8a", "token": "#9467bd", "vivace": "#d62728",
}  # fmt: skip
# Links under congestion: nothing in the way, first in first out, critical metadata first.
LINK_COLOURS = {"none": "#555555", "fifo": "#d62728", "priority": "#2ca02c"}
OTHER_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def colour(name: str) -> str:
    """A protocol's (or variant's) colour; a name not in the table gets a stable one of its own."""
    if name in PROTOCOL_COLOURS:
        return PROTOCOL_COLOURS[name]
    return OTHER_COLOURS[sum(map(ord, name)) % len(OTHER_COLOURS)]


def save(fig, path: Path, dpi: int = 110) -> Path:
    """Writes the figure and frees it (figures are made in loops; pyplot keeps them otherwise)."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


__all__ = ["LINK_COLOURS", "PROTOCOL_COLOURS", "colour", "plt", "save"]
