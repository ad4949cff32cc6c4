"""The load test's figure, drawn from summary.json alone (so a saved run can be redrawn):
throughput per operation for each protocol, and remote-update visibility per region pair.

    python -m loadtest plot loadtest-results/<run>/summary.json
"""

from __future__ import annotations

from pathlib import Path

from loadtest.harness.plots import colour, plt, save


def plot_summary(data: dict, path: Path) -> Path:
    runs = data["runs"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5))
    width = 0.8 / max(1, len(runs))

    kind = "store" if runs[0]["target"] == "store" else "http"
    names = sorted(
        {r["name"] for run in runs for r in run["requests"] if r["kind"] == kind},
        key=lambda n: -max(r["per_s"] for run in runs for r in run["requests"] if r["name"] == n),
    )
    for i, run in enumerate(runs):
        per_s = {r["name"]: r["per_s"] for r in run["requests"] if r["kind"] == kind}
        xs = [x + (i - (len(runs) - 1) / 2) * width for x in range(len(names))]
        left.bar(xs, [per_s.get(n, 0.0) for n in names], width, color=colour(run["protocol"]),
                 label=f"{run['protocol']}: {run['ops_per_s']:,.0f} ops/s in all")  # fmt: skip
    left.set_xticks(range(len(names)), [n.replace(": ", ":\n") for n in names], fontsize=8)
    left.set_ylabel("requests/s")
    left.set_title(f"throughput per operation ({runs[0]['target']} target, {runs[0]['clients']} users)")
    left.legend(fontsize=8)

    pairs = [(v["origin"], v["region"]) for v in runs[0]["visibility"]]
    for i, run in enumerate(runs):
        by = {(v["origin"], v["region"]): v for v in run["visibility"]}
        xs = [x + (i - (len(runs) - 1) / 2) * width for x in range(len(pairs))]
        means = [(by.get(p) or {}).get("mean_ms") or 0.0 for p in pairs]
        p90s = [(by.get(p) or {}).get("p90_ms") or 0.0 for p in pairs]
        right.bar(xs, means, width, color=colour(run["protocol"]), label=f"{run['protocol']} mean")
        right.scatter(xs, p90s, color="black", marker="_", s=120, zorder=3,
                      label="p90" if i == 0 else None)  # fmt: skip
    configured = [v["configured_ms"] for v in runs[0]["visibility"]]
    right.scatter(range(len(pairs)), configured, color="grey", marker="x", zorder=3, label="link latency")
    right.set_xticks(range(len(pairs)), [f"{a}\n→ {b}" for a, b in pairs], fontsize=7)
    right.set_ylabel("ms")
    right.set_title("remote-update visibility per region pair")
    right.legend(fontsize=8)

    settings = data["settings"]
    fig.suptitle(
        f"{settings['topology']}: {settings['users']:,}-user social graph, mix {settings['mix']}, "
        f"{settings['duration']:g} s per protocol"
    )
    return save(fig, path)
