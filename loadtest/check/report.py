"""What a checked run reports: tables on stdout, ``check.json`` and ``check.png`` (throughput and
visibility over time with the nemesis's faults marked)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from loadtest.check.atomicity import AtomicityResult, Fracture
from loadtest.check.causal import PATTERNS, CheckResult, Violation
from loadtest.check.convergence import Convergence
from loadtest.check.history import Failure, History, Op
from loadtest.check.linearizable import LinearizabilityResult
from loadtest.check.nemesis import Event
from loadtest.check.shard_probe import ProbeSample, shard_effects
from loadtest.harness.report import num, render_table
from loadtest.harness.stats import mean_present

WARM_UP_S = 3.0  # the first seconds of a run, left out of fault effects
WINDOW_GAP_S = 1.0  # failures further apart than this are separate unavailability windows
ANNOTATED_FAULTS = 12  # up to this many faults, each is labelled with its target on the plot


def describe(op: Op | None) -> str:
    if op is None:
        return "the initial state"
    what = (
        "read"
        if op.kind.value == "r"
        else ("write" if op.outcome.value == "ok" else "write (unknown outcome)")
    )
    shown = "∅" if op.value is None else op.value
    return f"s{op.session}#{op.index} {what} {op.key[0]}/{op.key[1]}={shown} at {op.region} ({op.end:.2f}s)"


def excerpt(violation: Violation) -> list[str]:
    lines = []
    if violation.read is not None:
        lines.append(f"    read:   {describe(violation.read)}")
        if violation.pattern != "ThinAirRead":
            lines.append(f"    source: {describe(violation.source)}")
            lines.append(f"    newer:  {describe(violation.newer)} (causally before the read)")
    if violation.chain:
        lines.append("    chain:  " + "\n         → ".join(describe(op) for op in violation.chain))
    return lines


def unavailability(failures: Sequence[Failure]) -> list[tuple[str, float, float, int]]:
    """Per region, the windows in which calls failed: (region, from s, to s, failed calls)."""
    windows: list[tuple[str, float, float, int]] = []
    for region in sorted({f.region for f in failures}):
        times = sorted(f.at for f in failures if f.region == region)
        start = end = times[0]
        count = 0
        for t in times:
            if t - end > WINDOW_GAP_S:
                windows.append((region, start, end, count))
                start, count = t, 0
            end = t
            count += 1
        windows.append((region, start, end, count))
    return sorted(windows, key=lambda w: w[1])


def fracture_lines(fracture: Fracture) -> list[str]:
    return [
        f"    saw:    {describe(fracture.seen)}",
        f"    missed: {describe(fracture.missed)} (same batch)",
        f"    got:    {describe(fracture.got)}",
    ]


def text_report(
    settings: dict,
    history: History,
    result: CheckResult,
    convergence: Convergence,
    events: list[Event],
    atomicity: AtomicityResult,
) -> str:
    out = []
    ok = sum(op.outcome.value == "ok" for op in history.ops)
    out.append(
        f"{settings['protocol']} on {settings['topology']}: {len(history.ops):,} operations "
        f"({ok:,} acknowledged) by {settings['sessions']} sessions in {settings['duration']:.0f} s, "
        f"{len(events)} faults; checked in {result.seconds:.1f} s"
    )
    rows = [[p, f"{result.counts[p]:,}"] for p in PATTERNS]
    out.append(render_table("\nCausal consistency (bad patterns, POPL'17)", ["pattern", "count"], rows))
    for pattern in PATTERNS:
        for violation in result.examples[pattern]:
            out.append(f"  {pattern}:")
            out += excerpt(violation)
    kind = "atomic" if settings["atomic_batches"] else "atomic=False"
    out.append(
        f"\nRead atomicity: {atomicity.fractured:,} of {atomicity.multi_reads:,} multi-reads saw part of "
        f"a batch ({atomicity.batches:,} batches, {kind})"
    )
    for fracture in atomicity.examples:
        out += fracture_lines(fracture)
    counters = sum(c["ok"] for c in convergence.counters.values())
    verdict = "yes" if convergence.converged else "NO"
    out.append(
        f"\nConvergence: {verdict} ({convergence.seconds:.1f} s to quiesce); "
        f"lost writes {convergence.lost_writes}, lost increments {convergence.lost_increments}, "
        f"doubled increments {convergence.doubled_increments} (of {counters:,} acknowledged)"
    )
    for line in (convergence.diverged + convergence.lost)[:10]:
        out.append(f"  {line}")
    errors = Counter(f.error for f in history.failures)
    if errors:
        out.append(
            "\nClient errors: " + ", ".join(f"{name} {count:,}" for name, count in errors.most_common())
        )
    out.append(f"Untyped errors (not a CausalError: a client bug): {len(history.untyped)}")
    out += [f"  {line}" for line in history.untyped[:10]]
    windows = unavailability(history.failures)
    if windows:
        rows = [[r, num(a), num(b), f"{n:,}"] for r, a, b, n in windows]
        out.append(
            render_table("\nUnavailability windows", ["region", "from s", "to s", "failed calls"], rows)
        )
    if events:
        rows = [[e.fault, e.target, num(e.start), num(e.end), e.note] for e in events]
        out.append(render_table("\nFaults", ["fault", "target", "from s", "to s", "note"], rows))
    outages = outage_effects(history, events)
    if outages:
        rows = [
            [o["region"], num(o["down_s"]), num(o["others_before_ops_s"]), num(o["others_during_ops_s"]),
             "-" if o["ratio"] is None else f"{o['ratio']:.2f}",
             "-" if o["caught_up_s"] is None else num(o["caught_up_s"])]
            for o in outages
        ]  # fmt: skip
        headers = ["region", "down s", "others ops/s before", "during", "ratio", "caught up s"]
        out.append(render_table("\nRegion outages (the others' throughput; the catch-up)", headers, rows))
    return "\n".join(out)


def linearizability_text(result: LinearizabilityResult, failed_calls: int) -> str:
    """The strong operations' check (loadtest/check/linearizable.py), with an excerpt of a key
    no single register explains."""
    out = [
        f"\nLinearizability: {result.operations:,} strong operations on {result.keys} registers: "
        f"{result.violations} not linearizable, {result.undecided} undecided ({failed_calls:,} failed calls; "
        f"{result.unseen_unknowns:,} of unknown outcome whose value nobody saw, left out)"
    ]
    for history in result.examples[:1]:
        for op in history[:12]:
            end = "unknown" if op.end is None else f"{op.end:.3f}"
            out.append(
                f"  {op.key} s{op.session} {op.kind} {op.arg!r} -> {op.result!r} [{op.start:.3f}, {end}]"
            )
    return "\n".join(out)


def linearizability_json(result: LinearizabilityResult) -> dict:
    return {
        "linearizability": {
            "operations": result.operations, "registers": result.keys, "violations": result.violations,
            "undecided": result.undecided, "unseen_unknowns": result.unseen_unknowns, "ok": result.ok,
        }
    }  # fmt: skip


def to_json(
    settings: dict,
    history: History,
    result: CheckResult,
    convergence: Convergence,
    events: list[Event],
    visibility: list[tuple[float, str, float | None]],
    atomicity: AtomicityResult,
    probes: Sequence[ProbeSample] = (),
) -> dict:
    data = {
        "settings": settings,
        "operations": len(history.ops),
        "acknowledged": sum(op.outcome.value == "ok" for op in history.ops),
        "violations": result.counts,
        "multi_reads": atomicity.multi_reads,
        "batches": atomicity.batches,
        "fractured_reads": atomicity.fractured,
        "fracture_examples": [fracture_lines(f) for f in atomicity.examples],
        "check_seconds": result.seconds,
        "examples": {p: [excerpt(v) for v in result.examples[p]] for p in PATTERNS},
        "converged": convergence.converged,
        "quiesce_seconds": convergence.seconds,
        "lost_writes": convergence.lost,
        "diverged": convergence.diverged,
        "counters": convergence.counters,
        "lost_increments": convergence.lost_increments,
        "doubled_increments": convergence.doubled_increments,
        "errors": dict(Counter(f.error for f in history.failures)),
        "untyped_errors": history.untyped,
        "unavailability": unavailability(history.failures),
        "faults": [e.__dict__ for e in events],
        "outages": outage_effects(history, events),
        "throughput": throughput(history),
        "visibility": visibility,
        "shard_probes": [asdict(p) for p in probes],
    }
    data["fault_effects"] = fault_effects(data)
    return data


def throughput(history: History) -> list[tuple[int, int]]:
    """Acknowledged operations per second of the run."""
    per_second = Counter(int(op.end) for op in history.ops if op.outcome.value == "ok")
    return sorted(per_second.items())


def plot(data: dict, path: Path) -> Path:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    seconds = [t for t, _ in data["throughput"]]
    top.plot(seconds, [n for _, n in data["throughput"]], color="#1f77b4", lw=1.2)
    top.set_ylabel("ops/s (acknowledged)")
    for region in sorted({r for _, r, _ in data["visibility"]}):
        points = [(t, v) for t, r, v in data["visibility"] if r == region]
        bottom.plot([t for t, _ in points], [v for _, v in points], lw=1, label=f"visible at {region}")
    bottom.set_ylabel("remote-update visibility, mean ms")
    bottom.set_xlabel("seconds into the run")
    bottom.legend(fontsize=8, ncol=4, loc="upper right")
    colours = plt.get_cmap("tab10")
    kinds = sorted({f["fault"] for f in data["faults"]})
    for event in data["faults"]:
        colour = colours(kinds.index(event["fault"]) % 10)
        for ax in (top, bottom):
            ax.axvspan(event["start"], event["end"] or event["start"], color=colour, alpha=0.18, lw=0)
        if len(data["faults"]) <= ANNOTATED_FAULTS:  # more would overlap: the legend names kinds
            top.annotate(
                event["target"], (event["start"], 1.0), xycoords=("data", "axes fraction"),
                fontsize=6, va="bottom", color=colour,
            )  # fmt: skip
    if kinds:
        patches = [Patch(color=colours(i % 10), alpha=0.35, label=kind) for i, kind in enumerate(kinds)]
        top.legend(handles=patches, fontsize=7, ncol=len(kinds), loc="lower center", frameon=False,
                   bbox_to_anchor=(0.5, 1.06))  # fmt: skip
    s = data["settings"]
    total = sum(data["violations"].values())
    fig.suptitle(
        f"{s['protocol']} on {s['topology']}: {data['operations']:,} operations, "
        f"{len(data['faults'])} faults, {total} violations, {len(data['lost_writes'])} lost",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(out: Path, data: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)

    (out / "check.json").write_text(json.dumps(data, indent=2, default=str))
    return [out / "check.json", plot(data, out / "check.png")]


def outage_effects(history: History, events: list[Event]) -> list[dict]:
    """Per region-outage: the other regions' acknowledged operations a second while it was down,
    against as long a time just before it (the issue's bar: at least 0.9 of it), and how long the
    region took to catch up once back."""
    effects = []
    for event in events:
        if event.fault != "region-outage" or event.back is None:
            continue
        down_s = event.back - event.start
        before_from = max(0.0, event.start - down_s)

        def rate(a: float, b: float, target: str = event.target) -> float:
            n = sum(
                1
                for op in history.ops
                if op.outcome.value == "ok" and op.region != target and a <= op.end < b
            )
            return n / (b - a) if b > a else 0.0

        before, during = rate(before_from, event.start), rate(event.start, event.back)
        effects.append({
            "region": event.target, "down_s": round(down_s, 1), "others_before_ops_s": round(before, 1),
            "others_during_ops_s": round(during, 1), "ratio": round(during / before, 3) if before else None,
            "caught_up_s": None if event.caught_up_s is None else round(event.caught_up_s, 2),
        })  # fmt: skip
    return effects


def fault_effects(data: dict) -> list[dict]:
    """Per kind of fault: acknowledged operations a second and remote updates' mean visibility
    while one of that kind was on, against the time no fault was on (what a clock skew or a slow
    shard costs; the first seconds, while the cluster warms up, are left out)."""
    spans = [
        (f["fault"], f["start"], f["end"] if f["end"] is not None else f["start"]) for f in data["faults"]
    ]

    def kind_at(t: float) -> str | None:
        return next((kind for kind, a, b in spans if a <= t < b), None)

    rates: dict[str | None, list[int]] = {}
    for second, count in data["throughput"]:
        if second >= WARM_UP_S:
            rates.setdefault(kind_at(second + 0.5), []).append(count)
    seen: dict[str | None, list[float]] = {}
    for t, _, mean in data["visibility"]:
        if mean is not None and t >= WARM_UP_S:
            seen.setdefault(kind_at(t), []).append(mean)

    quiet_rate, quiet_seen = mean_present(rates.get(None, [])), mean_present(seen.get(None, []))
    effects = [
        {
            "fault": kind,
            "ops_s": mean_present(rates.get(kind, [])),
            "ops_s_without_faults": quiet_rate,
            "visibility_ms": mean_present(seen.get(kind, [])),
            "visibility_ms_without_faults": quiet_seen,
        }
        for kind in sorted({kind for kind, _, _ in spans})
    ]
    for effect in effects:
        if effect["fault"] == "slow-shard":
            effect["others_visibility_ms"] = mean_present(_elsewhere(data, "slow-shard"))
            effect["shards"] = shard_effects(data["faults"], data.get("shard_probes", []))
    return effects


def _elsewhere(data: dict, kind: str) -> list[float]:
    """The visibility samples of the regions a fault of ``kind`` did not hit, while it was on."""
    hits = [(f["target"].partition(".")[0], f["start"], f["end"] or f["start"]) for f in data["faults"]
            if f["fault"] == kind]  # fmt: skip
    return [
        mean for t, region, mean in data["visibility"]
        if mean is not None and any(a <= t < b and region != hit for hit, a, b in hits)
    ]  # fmt: skip


def fault_effects_text(effects: list[dict]) -> str:
    rows = [
        [e["fault"], num(e["ops_s"]), num(e["ops_s_without_faults"]), num(e["visibility_ms"]),
         num(e["visibility_ms_without_faults"])]
        for e in effects
    ]  # fmt: skip
    headers = ["fault", "ops/s during", "without faults", "visibility ms during", "without faults"]
    text = render_table("\nWhat each kind of fault cost", headers, rows)
    for e in effects:
        shards = e.get("shards")
        if e["fault"] == "slow-shard" and shards:
            text += (
                f"\nslow-shard, written elsewhere to seen at the slowed region: its slowed shard "
                f"{num(shards['slowed_shard_ms'])} ms, its other shards {num(shards['other_shards_ms'])} ms, "
                f"without faults {num(shards['without_faults_ms'])} ms ({shards['samples']} rows); "
                f"the other regions' visibility meanwhile {num(e.get('others_visibility_ms'))} ms\n"
            )
    return text
