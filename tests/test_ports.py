"""Free ports for started clusters (loadtest/harness/ports.py): each process of a run side by side
takes its own part of a range, and a base is taken only where every port above it is free."""

from __future__ import annotations

import socket

import pytest

from loadtest.harness import ports


def test_the_parts_of_a_range_are_contiguous_and_never_overlap(monkeypatch):
    parts = []
    for index in range(3):
        monkeypatch.setenv(ports.SLICE_ENV, f"{index}/3")
        parts.append(ports.my_part(10000, 32768))
    assert all(len(part) == len(parts[0]) > 0 for part in parts)
    assert [p.start for p in parts[1:]] == [p.stop for p in parts[:-1]]  # one after another
    assert parts[0].start == 10000 and parts[-1].stop <= 32768
    monkeypatch.delenv(ports.SLICE_ENV)
    assert ports.my_part(10000, 32768) == range(10000, 32600, ports.STEP)  # alone: the whole range


@pytest.mark.parametrize("value", ["2", "a/2", "2/2", "-1/2", "1/0"])
def test_a_bad_slice_is_refused_with_the_variables_name(monkeypatch, value):
    monkeypatch.setenv(ports.SLICE_ENV, value)
    with pytest.raises(ValueError, match=ports.SLICE_ENV):
        ports.port_slice()


def test_a_base_is_taken_only_where_every_port_is_free_and_inside_the_part():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        bases = range(port - 10, port - 10 + 3 * ports.STEP, ports.STEP)
        offsets = [("127.0.0.1", 0), ("127.0.0.1", 10)]  # the second lands on the busy port at the first base
        assert ports.free_base(offsets, bases) == bases[1]
        assert ports.free_base(offsets, bases, first=2) == bases[2]
        too_tall = [("127.0.0.1", 0), ("127.0.0.1", 3 * ports.STEP)]  # would end past the part
        assert ports.free_base(too_tall, bases) is None
