"""What each protocol is, in one table: the topology's validation, the process plan, the launcher,
compose, the gears' configuration, ``describe`` (and so the client) and the web app read these
traits, never a protocol's name. A new protocol is one module under services/protocols/ (its
``Protocol`` subclass: how its receiver makes remote updates visible) and one row here.

This module imports nothing of the services, so that the topology can validate against it and
the gears can be configured from it without loading any protocol's code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

# How an attach decides that a client's causal past is visible here (attach.lua): "none" at
# once; "tree" a migration's label has arrived through the tree in order; "direct" a migration's
# label arrived straight from its source, and an update label waits for every sender's watermark;
# "vector" every entry of the label's dependency vector is below its sender's watermark;
# "stable_time" every region's watermark is past the label's timestamp.
AttachRule = Literal["none", "tree", "direct", "vector", "stable_time"]
ATTACH_RULES: tuple[str, ...] = ("none", "tree", "direct", "vector", "stable_time")


@dataclass(frozen=True)
class Traits:
    name: str
    #: "package.module:Class" of its Protocol subclass (imported only where a receiver runs)
    implementation: str
    #: runs Saturn's serializer tree: serializers, a label sink per region, the remote proxy on the
    #: bulk receiver's ``tree`` service, the tree record (epochs) and its reconfiguration
    tree: bool = False
    #: the gears append every label to the region's label stream (read by the label pump)
    emits_labels: bool = False
    #: labels carry dependency vectors (the client keeps one; rows and payloads carry theirs)
    vectors: bool = False
    attach: AttachRule = "none"
    #: a migration makes a label of its own (ordered with the region's labels); without one the
    #: client's timestamp travels with it and its attach waits for stability instead
    migration_label: bool = True

    def __post_init__(self) -> None:
        if self.attach not in ATTACH_RULES:
            raise ValueError(f"protocol {self.name!r}: attach rule {self.attach!r} unknown ({ATTACH_RULES})")
        if ":" not in self.implementation:
            raise ValueError(f"protocol {self.name!r}: implementation must be 'module:Class'")

    def as_dict(self) -> dict[str, object]:
        """What ``describe`` tells a client and an operator."""
        found = asdict(self)
        found.pop("implementation")
        return found


TRAITS: dict[str, Traits] = {}


def register(traits: Traits) -> Traits:
    """Adds a protocol's row (a test registers a toy protocol this way)."""
    TRAITS[traits.name] = traits
    return traits


def traits_of(name: str) -> Traits:
    """The row of protocol ``name``; ValueError naming the known ones."""
    try:
        return TRAITS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r} (known: {', '.join(TRAITS)})") from None


for _row in (
    Traits("eventual", "services.protocols.eventual:Eventual"),
    Traits("saturn", "services.protocols.saturn:Saturn", tree=True, emits_labels=True, attach="tree"),
    Traits(
        "gentlerain", "services.protocols.gentlerain:GentleRain", attach="stable_time", migration_label=False
    ),
    Traits("cure", "services.protocols.cure:Cure", vectors=True, attach="vector", migration_label=False),
    Traits("c3", "services.protocols.c3:C3", emits_labels=True, attach="direct"),
):
    register(_row)
