"""Free ports for the clusters a process starts, and the part of a range a process may take.

A topology's ports lie at offsets above its base port (services/topology_addresses.py): a few
dozen, a few hundred with WAN relays. A base is taken where every one of them is free at that
moment. Two processes looking at once can both see a base free and both take it (the test
suite's two workers did, and a store found its port in use), so processes started side by side
are each given a contiguous part of the range by ``$SATURN_PORT_SLICE`` = "i/n" (the i-th of n
parts; tests/conftest.py sets it per worker). Without it a process may use the whole range.
"""

from __future__ import annotations

import functools
import os
import socket

from services.topology import Topology

SLICE_ENV = "SATURN_PORT_SLICE"
STEP = 200  # bases are this far apart


def port_slice() -> tuple[int, int]:
    """(i, n) from ``$SATURN_PORT_SLICE``; (0, 1) when it is not set."""
    value = os.environ.get(SLICE_ENV)
    if not value:
        return 0, 1
    try:
        index, count = (int(part) for part in value.split("/"))
    except ValueError:
        raise ValueError(f"${SLICE_ENV}={value!r}: expected i/n, such as 0/2") from None
    if not 0 <= index < count:
        raise ValueError(f"${SLICE_ENV}={value!r}: i must be from 0 to n-1")
    return index, count


def my_part(low: int, high: int) -> range:
    """The bases of this process's part of the ports [low, high): contiguous, STEP apart; a
    topology placed at one of them must end below the part's ``stop``."""
    index, count = port_slice()
    width = (high - low) // STEP // count * STEP
    return range(low + index * width, low + (index + 1) * width, STEP)


def offsets_of(topology: Topology) -> list[tuple[str, int]]:
    """(host, port - base port) of every port a deployment of ``topology`` listens on."""
    return [(host, port - topology.base_port) for _, host, port in topology.all_addresses()]


def port_free(host: str, port: int) -> bool:
    """Whether nothing listens at ``host``:``port``; a host not of this machine (a deployment's
    elsewhere) has nothing to check here."""
    if not _of_this_machine(host):
        return True
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


@functools.cache
def _of_this_machine(host: str) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, 0))
        except OSError:
            return False
    return True


def free_base(offsets: list[tuple[str, int]], bases: range, first: int = 0) -> int | None:
    """The first of ``bases``, from the ``first``-th on and wrapping round, at which every port
    (a base plus an offset) lies inside the part and is free; None if there is none."""
    top = max(offset for _, offset in offsets)
    for k in range(len(bases)):
        base = bases[(first + k) % len(bases)]
        if base + top < bases.stop and all(port_free(host, base + offset) for host, offset in offsets):
            return base
    return None
