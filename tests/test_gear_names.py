"""One list of gears. A gear's name is written in three places: its registration in the library
(services/region/lua/library.lua), the client's constants (causal_client/wire.py) and the store
module's allowlist of what the client user may call (services/region/module/saturn_calls.c).
The registrations are the list; the other two are checked against it here, so a gear added in one
place and forgotten in another fails this test, not a client in the field (EXTENDING.md, "How
to add a gear")."""

from __future__ import annotations

import re
from pathlib import Path

from causal_client import wire

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "services" / "region" / "lua" / "library.lua"
MODULE = ROOT / "services" / "region" / "module" / "saturn_calls.c"


def registered() -> dict[str, str]:
    """Every gear the library registers, and how: "guarded" (a client's: every check made),
    "sharded" (the services' own), or "plain"."""
    found: dict[str, str] = {}
    for registration in LIBRARY.read_text().split("redis.register_function")[1:]:
        name = re.search(r"'(saturn_\w+)'", registration)
        assert name, f"a registration names its gear: {registration[:80]!r}"
        how = re.search(r"\b(guarded|sharded)\(", registration)
        found[name.group(1)] = how.group(1) if how else "plain"
    return found


def allowed_to_clients() -> set[str]:
    array = re.search(r"CLIENT_GEARS\[\] = \{(.*?)NULL", MODULE.read_text(), re.S)
    assert array, "saturn_calls.c keeps its allowlist in CLIENT_GEARS"
    return set(re.findall(r'"(saturn_\w+)"', array.group(1)))


def client_names() -> set[str]:
    return {v for v in vars(wire).values() if isinstance(v, str) and re.fullmatch(r"saturn_\w+", v)}


def test_every_gear_the_client_names_is_registered_and_allowed_to_it():
    gears = registered()
    assert client_names() - set(gears) == set(), "the client names gears the library does not register"
    assert client_names() == allowed_to_clients(), "the module's allowlist and the client's names differ"


def test_the_module_lets_clients_call_none_of_the_services_own_gears():
    services_own = {name for name, how in registered().items() if how == "sharded"}
    assert services_own, "the library registers the services' gears (apply, deliver, heartbeat, ...)"
    assert allowed_to_clients() & services_own == set()


def test_every_gear_the_services_call_is_registered():
    named = set()
    for source in (ROOT / "services").rglob("*.py"):
        named |= set(re.findall(r"[\"'](saturn_\w+)[\"']", source.read_text())) - {"saturn_pb2"}
    assert named, "the services call gears by name (apply, deliver, heartbeat, ...)"
    assert named - set(registered()) == set()
