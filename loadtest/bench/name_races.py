"""Sign-up races: ``python -m loadtest bench name-races [--races N] [--kill] [--unknown P] [--out DIR]``.

Sign-up's claim (webapp/accounts.py ``claim_name``: an insert-if-absent on the name's strong
register, an unknown outcome settled by reading it) raced from every region of ``demo-3region`` at
once for ``--races`` fresh names; each racer told it won writes the account row with its token, as
sign-up does. ``--kill``: one region's store is killed for the middle third of the run (its racers
fail, the others go on: a majority is left). ``--unknown P``: a share P of the racers' calls ends
in ``OutcomeUnknown`` (half after the call landed, its reply lost; half before it was sent).

Counted, each must be 0: names with two winners, racers told different holders of one name, names
whose register holds another token than its winner's (a takeover), account rows whose token is
not the register's. Names every racer failed on (a region down, conflicts) are reported, and are
no violation. Writes ``name_races.json``.
"""

from __future__ import annotations

import argparse
import random
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from causal_client import CausalClient, CausalError, OutcomeUnknown, Session
from causal_client.commands import Command
from loadtest.harness.cluster import clients_at_sites, find_base_port, started, with_overrides
from loadtest.harness.experiment import FAILED, PASSED, Experiment
from loadtest.harness.options import positive
from loadtest.harness.report import render_table, say, write_rows
from services.topology import Topology
from webapp.accounts import USERNAMES, claim_name

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "demo-3region.toml"
IN_FLIGHT = 24  # names raced at once
T = TypeVar("T")


@dataclass
class RaceTally:
    races: int = 0
    racers: int = 0
    failed_racers: int = 0  # a racer whose claim raised (region down, conflicts): it knows nothing
    injected_unknown: int = 0
    undecided: int = 0  # names on which every racer failed
    two_winners: int = 0
    disagreeing: int = 0  # racers of one name told different holders
    takeovers: int = 0  # the register holds a token other than the winner's
    wrong_accounts: int = 0  # an account row whose token is not the register's
    killed: str = ""
    seconds: float = 0.0

    @property
    def violations(self) -> int:
        return self.two_winners + self.disagreeing + self.takeovers + self.wrong_accounts


class Unreliable:
    """A session whose strong calls end in ``OutcomeUnknown`` with probability ``p``: half of
    them after the call landed (its reply lost), half before it was sent."""

    def __init__(
        self, session: Session, p: float, rng: random.Random, tally: RaceTally, lock: threading.Lock
    ):
        self.session, self.p, self.rng, self.tally, self.lock = session, p, rng, tally, lock

    def _maybe(self, call: Callable[[], T]) -> T:
        roll = self.rng.random()
        if roll >= self.p:
            return call()
        with self.lock:
            self.tally.injected_unknown += 1
        if roll < self.p / 2:
            call()
            raise OutcomeUnknown("injected: the reply was lost")
        raise OutcomeUnknown("injected: the connection broke before the call was sent")

    def execute(self, namespace: str, key: str, command: Command):
        return self._maybe(lambda: self.session.execute(namespace, key, command))

    def strong_read(self, namespace: str, key: str):
        return self._maybe(lambda: self.session.strong_read(namespace, key))


def race(
    clients: dict[str, CausalClient], pool: ThreadPoolExecutor, name: str, p: float, tally: RaceTally,
    lock: threading.Lock,
) -> dict[str, tuple[str, str | None]]:  # fmt: skip
    """Every region's racer for ``name`` at once: region -> (its token, the holder it was told;
    None when its claim failed)."""

    def racer(region: str) -> tuple[str, str | None]:
        token = secrets.token_hex(12)
        try:
            session = clients[region].session(region)
            holder = claim_name(Unreliable(session, p, random.Random(), tally, lock), name, token)  # type: ignore[arg-type]
            if holder == token:
                session.write("all", f"account:{name}", {"claim": token})
            return token, holder
        except CausalError:
            return token, None

    futures = {region: pool.submit(racer, region) for region in clients}
    return {region: future.result() for region, future in futures.items()}


def raced(races: int, kill: bool, p: float, work: Path) -> RaceTally:
    """``races`` names raced on a fresh cluster, then every one checked."""
    topology = with_overrides(Topology.load(TOPOLOGY), protocol="saturn")
    topology = with_overrides(topology, base_port=find_base_port(topology))
    tally, lock = RaceTally(), threading.Lock()
    outcomes: dict[str, dict[str, tuple[str, str | None]]] = {}
    with (
        started(topology, work / "run") as cluster,
        clients_at_sites(cluster.topology) as clients,
        ThreadPoolExecutor(IN_FLIGHT) as in_flight,
        ThreadPoolExecutor(IN_FLIGHT * len(clients)) as racers,
    ):
        victim = cluster.topology.region_names[-1]
        names = [f"race{n}-{secrets.token_hex(4)}" for n in range(races)]
        began = time.monotonic()
        down = False
        for start in range(0, races, IN_FLIGHT):
            if kill and not down and start >= races // 3 and not tally.killed:
                say(f"  killing {victim}'s store ({start:,} races done)")
                cluster.kill(f"{victim}.redis0")
                tally.killed, down = victim, True
            if kill and down and start >= 2 * races // 3:
                say(f"  {victim}'s store back ({start:,} races done)")
                cluster.restart(f"{victim}.redis0")
                down = False
            batch = names[start : start + IN_FLIGHT]
            results = list(in_flight.map(lambda n: race(clients, racers, n, p, tally, lock), batch))
            outcomes.update(zip(batch, results, strict=True))
            if (start // IN_FLIGHT) % 50 == 0:
                say(f"  {start + len(batch):,} of {races:,} races ({time.monotonic() - began:.0f} s)")
        if down:
            cluster.restart(f"{victim}.redis0")
        tally.seconds = time.monotonic() - began
        time.sleep(2)  # the last account rows reach the checking region (blue: causal, not instant)
        say(f"  {races:,} races in {tally.seconds:.0f} s; reading every name's register and account back ...")
        check(clients[cluster.topology.region_names[0]], cluster.topology.region_names[0], outcomes, tally)
    return tally


def check(
    client: CausalClient,
    region: str,
    outcomes: dict[str, dict[str, tuple[str, str | None]]],
    tally: RaceTally,
) -> None:
    """Every name's register and account row read back (many at once), set against what its
    racers were told."""
    session_for = threading.local()

    def read_back(name: str) -> tuple[str | None, str | None]:
        if not hasattr(session_for, "session"):
            session_for.session = client.session(region)
        session: Session = session_for.session
        held = session.strong_read(USERNAMES, name).value
        row = session.read("all", f"account:{name}")
        return held, row.text("claim") if "claim" in row else None

    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        found = dict(zip(outcomes, pool.map(read_back, outcomes), strict=True))
    for name, racers in outcomes.items():
        tally.races += 1
        tally.racers += len(racers)
        told = {holder for _, holder in racers.values() if holder is not None}
        tally.failed_racers += sum(holder is None for _, holder in racers.values())
        winners = [token for token, holder in racers.values() if holder is not None and holder == token]
        tally.two_winners += len(winners) > 1
        tally.disagreeing += len(told) > 1
        held, claim = found[name]
        if not told:
            tally.undecided += 1
            continue
        if winners and held != winners[0]:
            tally.takeovers += 1
        if claim is not None and claim != held:
            tally.wrong_accounts += 1


def share(text: str) -> float:
    """An argparse type: a share of calls, 0 to 0.5."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be within 0-0.5, got {text}")
    return value


def arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--races", type=positive(int), default=10_000, help="names raced (default: 10,000)")
    add("--kill", action="store_true", help="kill one region's store for the middle third")
    add("--unknown", type=share, default=0.0, help="share of calls ending unknown (0-0.5)")


def run(args: argparse.Namespace) -> int:
    faults = [
        *(["a region killed"] if args.kill else []),
        *([f"{args.unknown:.0%} unknown outcomes"] if args.unknown else []),
    ]
    say(f"name races: {args.races:,} names from every region at once{''.join(', ' + f for f in faults)}")
    with tempfile.TemporaryDirectory() as scratch:
        tally = raced(args.races, args.kill, args.unknown, Path(scratch))
    heads = ["races", "racers", "failed racers", "injected unknown", "undecided", "two winners",
             "disagreeing", "takeovers", "wrong accounts", "seconds"]  # fmt: skip
    row = [f"{tally.races:,}", f"{tally.racers:,}", f"{tally.failed_racers:,}", f"{tally.injected_unknown:,}",
           f"{tally.undecided:,}", str(tally.two_winners), str(tally.disagreeing), str(tally.takeovers),
           str(tally.wrong_accounts), f"{tally.seconds:.0f}"]  # fmt: skip
    print(render_table("Sign-up races on the usernames' registers", heads, [row]))
    print(
        f"{tally.violations} violations"
        + (f" ({tally.killed}'s store killed for a third)" if tally.killed else "")
    )
    write_rows(args.out, "name_races", [tally])
    return PASSED if tally.violations == 0 else FAILED


EXPERIMENT = Experiment(
    name="name-races",
    summary="sign-up's name claims raced from every region: one winner each, faults or not",
    minutes=(4.5, 4.5),
    run=run,
    arguments=arguments,
    shared={"out": ""},
    about=__doc__ or "",
)
