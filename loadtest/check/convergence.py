"""After a checked run: let replication quiesce, then check that every replica of a group holds
the same cells (convergence), that no acknowledged write was lost (its own column, set with its
value, is at every replica, and the value column holds what last-writer-wins says survives),
and that the groups' counters add up to the acknowledged increments (never more than those
plus the ones of unknown outcome: more would be an increment applied twice)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from causal_client import CausalClient, CausalError, ReadSpec
from loadtest.check.history import History, Kind, Outcome
from loadtest.check.workload import COUNTER_COLUMN, LOG_PREFIX, VALUE_COLUMN, counter_row, log_column

Snapshot = dict[tuple[str, str], tuple[str | None, tuple[int, str] | None]]  # key → (value, label)
LOG_PAGE = 1000  # log columns read per call
LOG_RECHECKS = 5  # a write missing from a replica's log is looked for again this often ...
LOG_RECHECK_S = 1.0  # ... this far apart (replication may still be bringing it)


@dataclass
class Convergence:
    converged: bool
    seconds: float  # how long replication took to quiesce after the run
    diverged: list[str] = field(default_factory=list)  # keys whose replicas differ, described
    lost: list[str] = field(default_factory=list)  # acknowledged writes LWW says must survive
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # group → final/ok/unknown
    lost_increments: int = 0
    doubled_increments: int = 0

    @property
    def lost_writes(self) -> int:
        return len(self.lost)


def snapshot(
    client: CausalClient, region: str, keys: list[tuple[str, str]]
) -> tuple[Snapshot, dict[str, int]]:
    """Every key's cell and every group's counter as ``region`` holds them (one multi-read)."""
    groups = sorted({g for g, _ in keys})
    specs = [ReadSpec(g, r, (VALUE_COLUMN,)) for g, r in keys] + [
        ReadSpec(g, counter_row(keys), (COUNTER_COLUMN,)) for g in groups
    ]
    rows = client.session(region, auto_migrate=False).multi_read(specs)
    cells: Snapshot = {}
    for (group, row), result in zip(keys, rows, strict=False):
        cell = result.cell(VALUE_COLUMN)
        cells[group, row] = (None, None) if cell is None else (cell.text, (cell.label.ts, cell.label.src))
    counters = {
        g: result.counter(COUNTER_COLUMN) for g, result in zip(groups, rows[len(keys) :], strict=True)
    }
    return cells, counters


def quiesce(
    client: CausalClient,
    keys: list[tuple[str, str]],
    replicas: dict[str, tuple[str, ...]],
    timeout_s: float,
    say: Callable[[str], None],
) -> tuple[bool, float, dict[str, tuple[Snapshot, dict[str, int]]]]:
    """Reads every region's copy until the replicas of every group agree and nothing changes
    between two rounds (or ``timeout_s``). Returns (agreed, seconds, last snapshots)."""
    began = time.monotonic()
    previous = None
    while True:
        shots = {}
        for region in client.regions:
            mine = [k for k in keys if region in replicas[k[0]]]
            try:
                shots[region] = snapshot(client, region, mine)
            except CausalError as exc:
                say(f"  {region} not readable yet ({type(exc).__name__})")
        agreed = len(shots) == len(client.regions) and not _differences(keys, replicas, shots)
        if agreed and shots == previous:
            return True, time.monotonic() - began, shots
        if time.monotonic() - began > timeout_s:
            return False, time.monotonic() - began, shots
        previous = shots
        time.sleep(0.5)


def _differences(keys, replicas, shots) -> list[str]:
    found = []
    for key in keys:
        holders = [r for r in replicas[key[0]] if r in shots]
        copies = {r: shots[r][0].get(key) for r in holders}
        if len(set(copies.values())) > 1:
            found.append(f"{key[0]}/{key[1]}: " + ", ".join(f"{r}={v[0]}" for r, v in copies.items()))
    for group in {k[0] for k in keys}:
        counts = {r: shots[r][1].get(group) for r in replicas[group] if r in shots}
        if len(set(counts.values())) > 1:
            found.append(f"{group}/{counter_row(keys)}: " + ", ".join(f"{r}={v}" for r, v in counts.items()))
    return found


def check_convergence(
    client: CausalClient,
    history: History,
    keys: list[tuple[str, str]],
    replicas: dict[str, tuple[str, ...]],
    say: Callable[[str], None],
    timeout_s: float = 60.0,
) -> Convergence:
    agreed, seconds, shots = quiesce(client, keys, replicas, timeout_s, say)
    result = Convergence(converged=agreed, seconds=seconds)
    if not agreed:
        result.diverged = _differences(keys, replicas, shots) or ["some region could not be read"]
    newest: dict[tuple[str, str], tuple[tuple[int, str], str]] = {}  # LWW winner among the acked
    for op in history.ops:
        acked = op.kind == Kind.WRITE and op.outcome == Outcome.OK and op.label is not None
        if acked and (op.key not in newest or op.label > newest[op.key][0]):  # type: ignore[operator]
            newest[op.key] = (op.label, op.value)  # type: ignore[assignment]
    for key, (label, value) in newest.items():
        for region in replicas[key[0]]:
            if region not in shots:
                continue
            final_value, final_label = shots[region][0].get(key, (None, None))
            if final_label is None or final_label < label:
                result.lost.append(f"{key[0]}/{key[1]}={value} at {region} (holds {final_value})")
    logs_lost, logs_diverged = check_logs(client, history, keys, replicas, say)
    result.lost += logs_lost
    if logs_diverged:
        result.converged = False
        result.diverged += logs_diverged
    for group, tally in history.counters.items():
        finals = [shots[r][1].get(group, 0) for r in replicas[group] if r in shots]
        final = max(finals, default=0)
        result.counters[group] = {"final": final, **tally}
        result.lost_increments += max(0, tally["ok"] - final)
        result.doubled_increments += max(0, final - tally["ok"] - tally["unknown"])
    return result


def logged(client: CausalClient, region: str, key: tuple[str, str]) -> set[str]:
    """The log columns of a key as ``region`` holds them (LOG_PREFIX), page by page."""
    session = client.session(region, auto_migrate=False)
    found: set[str] = set()
    after: str | None = None
    while True:
        page = session.slice(key[0], key[1], limit=LOG_PAGE, after=after, reverse=False)
        found.update(c for c in page.columns if c.startswith(LOG_PREFIX))
        if page.next_cursor is None or len(page.cells) < LOG_PAGE:
            return found
        after = page.next_cursor


def check_logs(
    client: CausalClient,
    history: History,
    keys: list[tuple[str, str]],
    replicas: dict[str, tuple[str, ...]],
    say: Callable[[str], None],
) -> tuple[list[str], list[str]]:
    """Every acknowledged write's own column at every replica of its key (a write lost behind a
    later one of the same key shows here), and each key's log the same at every replica.
    Replication may still be bringing columns (quiescence looked at the value column only: a
    write that lost last-writer-wins can still be on its way), so a key whose replicas lack an
    acknowledged write or differ is read again, every replica of it, a few times. Returns
    (lost writes, keys whose logs differ or could not be read), described."""
    wanted: dict[tuple[str, str], set[str]] = {}
    for op in history.ops:
        if op.kind == Kind.WRITE and op.outcome == Outcome.OK and op.value is not None:
            wanted.setdefault(op.key, set()).add(log_column(op.value))
    holders = {key: [r for r in replicas[key[0]] if r in client.regions] for key in keys}
    logs: dict[tuple[str, tuple[str, str]], set[str]] = {}

    def settled(key: tuple[str, str]) -> bool:
        held = [logs.get((r, key)) for r in holders[key]]
        if any(log is None for log in held):
            return False
        return len({frozenset(log) for log in held if log is not None}) <= 1 and all(
            wanted.get(key, set()) <= log for log in held if log is not None
        )

    todo = list(keys)
    for attempt in range(LOG_RECHECKS + 1):
        for key in todo:
            for region in holders[key]:
                try:
                    logs[region, key] = logged(client, region, key)
                except CausalError as exc:
                    logs.pop((region, key), None)
                    say(f"  {region}'s log of {key[0]}/{key[1]} not readable yet ({type(exc).__name__})")
        todo = [key for key in todo if not settled(key)]
        if not todo or attempt == LOG_RECHECKS:
            break
        time.sleep(LOG_RECHECK_S)
    lost, diverged = [], []
    for key in todo:
        readable = {r: logs[r, key] for r in holders[key] if (r, key) in logs}
        for region in holders[key]:
            if region not in readable:
                diverged.append(f"{key[0]}/{key[1]} log: not readable at {region}")
        for region, log in readable.items():
            lost += [
                f"{key[0]}/{key[1]}: {column.removeprefix(LOG_PREFIX)} (acknowledged) missing at {region}"
                for column in sorted(wanted.get(key, set()) - log)
            ]
        if len({frozenset(v) for v in readable.values()}) > 1:
            union = set().union(*readable.values())
            lacks = ", ".join(f"{r} lacks {len(union - v)}" for r, v in readable.items() if union - v)
            diverged.append(f"{key[0]}/{key[1]} log: {lacks}")
    return lost, diverged
