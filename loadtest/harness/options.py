"""The options experiments share, defined once: an experiment names the ones it takes and its
defaults (``Experiment.shared``), and every one of them reads and checks the same way.

    topology   --topology FILE        a topology file (the experiment's default)
    protocols  --protocols a,b,c      protocols in turn (each checked against the registry)
    protocol   --protocol NAME        one protocol
    rounds     --rounds N             turns of everything, alternating where there are several
    quick      --quick                the short version (the value is what "short" means here)
    out        --out DIR              where results go (None: required; "": print only without it)
    base_port  --base-port N          the first port of the cluster started (default: a free block)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "topologies"


def positive(kind: type) -> Callable[[str], float]:
    """An argparse type: a number above zero."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def cluster_store(text: str) -> tuple[int, int]:
    """An argparse type: a Redis Cluster's shape, ``MASTERS`` or ``MASTERSxREPLICAS`` (replicas
    per master; 1 when not given), e.g. ``2x1``."""
    masters, _, replicas = text.partition("x")
    try:
        shape = int(masters), int(replicas or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not MASTERS[xREPLICAS]: {text!r}") from None
    if shape[0] < 1 or shape[1] < 0:
        raise argparse.ArgumentTypeError(f"at least one master and no fewer than 0 replicas, got {text}")
    return shape


def non_negative(text: str) -> float:
    """An argparse type: a number of seconds, zero allowed."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def numbers(kind: type) -> Callable[[str], list]:
    """An argparse type: a comma-separated list of positive numbers (``1,10,100``)."""
    one = positive(kind)

    def parse(text: str) -> list:
        values = [one(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError("an empty list")
        return values

    return parse


def protocol_list(text: str) -> list[str]:
    """An argparse type: comma-separated protocols, each one the services know (a variant such
    as ``saturn+serial`` is checked by the experiment that takes it)."""
    from services.protocols import PROTOCOLS

    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [n for n in names if n.partition("+")[0] not in PROTOCOLS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown protocol {', '.join(unknown) or '(none)'} (known: {', '.join(PROTOCOLS)})"
        )
    return names


def shown(path: object) -> str:
    """A default path as a reader of --help knows it: relative to the repository."""
    try:
        return str(Path(str(path)).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _topology(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    return parser.add_argument(
        "--topology", default=str(default), help=f"topology file (default: {shown(default)})"
    )


def _protocols(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    text = default if isinstance(default, str) else ",".join(cast(Iterable[str], default))
    return parser.add_argument(
        "--protocols", type=protocol_list, default=text, help=f"comma-separated, in turn (default: {text})"
    )


def _protocol(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    return parser.add_argument("--protocol", default=default, help=f"the protocol (default: {default})")


def _rounds(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    return parser.add_argument(
        "--rounds", type=positive(int), default=default, help=f"turns of everything (default: {default})"
    )


def _quick(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    return parser.add_argument("--quick", action="store_true", help=f"the short version: {default}")


def _out(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    if default is None:
        return parser.add_argument("--out", required=True, help="directory for the results (required)")
    elif default == "":  # optional: without it the experiment prints its tables only
        return parser.add_argument("--out", help="directory for the results (default: print only)")
    else:
        return parser.add_argument(
            "--out", default=str(default), help=f"directory for results (default: {default})"
        )


def _base_port(parser: argparse.ArgumentParser, default: object) -> argparse.Action:
    return parser.add_argument(
        "--base-port", type=positive(int), default=default, help="first port of the started cluster "
        "(default: a free block)"
    )  # fmt: skip


SHARED: dict[str, Callable[[argparse.ArgumentParser, object], argparse.Action]] = {
    "topology": _topology,
    "protocols": _protocols,
    "protocol": _protocol,
    "rounds": _rounds,
    "quick": _quick,
    "out": _out,
    "base_port": _base_port,
}


@dataclass(frozen=True)
class Meaning:
    """A shared option's default with what it means in this experiment (``--rounds`` may be
    "operations of each kind per region" rather than turns of everything)."""

    default: object
    help: str


def add_shared(parser: argparse.ArgumentParser, shared: Mapping[str, object]) -> None:
    """Adds the shared options an experiment takes, in the table's order."""
    unknown = set(shared) - set(SHARED)
    if unknown:
        raise ValueError(f"unknown shared options {sorted(unknown)} (known: {', '.join(SHARED)})")
    for name, add in SHARED.items():
        if name in shared:
            value = shared[name]
            if isinstance(value, Meaning):
                action = add(parser, value.default)
                action.help = f"{value.help} (default: {value.default})"
            else:
                add(parser, value)
