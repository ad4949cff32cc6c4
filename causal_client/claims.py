"""Strongly consistent claims (a "red" operation in RedBlue's terms): which region decides.

Causal consistency cannot keep a username unique when two regions register it at once; one
compare-and-set at a single, agreed region can. Every key has an owner region, computed the same
way by every client and every frontend from the topology's region order, so concurrent claims
of one key meet at one Redis and exactly one wins. The price is a round trip to the owner.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

MAX_PART = 200
_PART = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")  # printable, no control characters


def owner_region(regions: Sequence[str], namespace: str, key: str) -> str:
    """The region that decides claims of ``key`` in ``namespace``."""
    return regions[zlib.crc32(f"{namespace}\x00{key}".encode()) % len(regions)]


def check_part(what: str, value: str) -> str | None:
    """Why ``value`` cannot be ``what`` (a claim's or a strong register's namespace, key or
    holder: "claim key", "register namespace"), None if it can."""
    if not value:
        return f"{what} must not be empty"
    if not isinstance(value, str) or not _PART.match(value):
        return f"{what} must be 1-{MAX_PART} printable characters"
    return None
