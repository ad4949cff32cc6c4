"""``loadtest soak`` (loadtest/check/soak.py): how the legs cover the protocols, kinds of topology
and nemeses (no processes), and a short soak as CI runs it: every nemesis at least once under
saturn, on all four kinds of topology (a master killed and a shard moved on Redis Cluster
stores), with strong sessions in both modes, each segment's history written and checked: no
anomaly, nothing lost or doubled, converged, every strong operation linearizable. It is the
suite's test of saturn under every fault."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from helpers.deadlines import scaled

from loadtest.check.nemesis import CLUSTER_STORE_FAULTS, FAULTS
from loadtest.check.soak import KINDS, MIN_SEGMENT_OPS, PROTOCOLS, TREE_FAULTS, Shares, Soak, applies, legs


def test_every_protocol_meets_every_nemesis_that_applies_to_it_on_one_of_its_legs():
    met: dict[str, list[str]] = defaultdict(list)
    kinds_of: dict[str, set[str]] = defaultdict(set)
    for leg in legs():
        kinds_of[leg.protocol].add(leg.kind)
        for nemesis in leg.nemeses:
            met[leg.protocol].append(nemesis)
            if nemesis in CLUSTER_STORE_FAULTS:
                assert KINDS[leg.kind][1], f"{nemesis} needs a cluster store, got {leg.kind}"
    for protocol in PROTOCOLS:
        wanted = [f for f in FAULTS if applies(f, protocol)]
        assert sorted(met[protocol]) == sorted(wanted), protocol  # each once
        assert kinds_of[protocol] == set(KINDS), protocol
    assert not any(f in met["eventual"] for f in TREE_FAULTS)
    modes = {(leg.protocol, leg.strong_mode) for leg in legs()}
    assert all((p, m) in modes for p in PROTOCOLS for m in ("vivace", "token"))


def test_the_operations_are_shared_among_the_segments_and_a_segment_stays_bounded(tmp_path):
    planned, rounds, share = Soak(1_000_000, tmp_path).plan()
    segments = sum(len(leg.nemeses) for leg in planned)
    assert rounds == 1 and share * segments >= 1_000_000
    _, rounds, share = Soak(100_000_000, tmp_path).plan()
    assert rounds > 1 and share <= 50_000  # more rounds, not longer segments: memory stays flat


def test_a_slower_kind_gets_fewer_operations_and_what_a_segment_ran_over_comes_off_the_rest():
    kinds = ["full/standalone", "full/cluster"] * 5
    shares = Shares(100_000, kinds)
    checked = 0
    first = shares.next("full/standalone", checked)  # the prior: a standalone store runs faster
    shares.ran("full/standalone", first, first / 600)  # measured: 600 operations a second
    checked += first
    second = shares.next("full/cluster", checked)
    assert second < first
    shares.ran("full/cluster", second, second / 200)  # a third as fast as the standalone kind
    checked += second + 20_000  # the cluster segment ran far over its share (a long fault)
    third = shares.next("full/standalone", checked)
    fourth = shares.next("full/cluster", checked + third)
    assert abs(third / 600 - fourth / 200) < 1.0  # about as long each: shares go by the rates
    checked += third + fourth
    rest = []
    for kind in kinds[4:]:  # each runs its share exactly
        rest.append(shares.next(kind, checked))
        checked += rest[-1]
    assert all(share >= MIN_SEGMENT_OPS for share in rest)
    assert 100_000 <= checked < 100_000 + len(rest)  # the overshoot came off the later segments


@pytest.mark.cluster
@pytest.mark.timeout(600)  # ~220 s on a quiet 2-core machine, past 300 s beside other work
def test_a_short_soak_runs_every_nemesis_under_saturn_and_finds_nothing(tmp_path):
    out = tmp_path / "soak"
    command = [sys.executable, "-m", "loadtest", "soak", "--ops", "6000", "--protocols", "saturn",
               "--outage-seconds", "5", "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(900))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads((out / "soak.json").read_text())
    ran = {row["nemesis"] for row in data["table"]}
    assert ran == {f for f in FAULTS if applies(f, "saturn")}
    for row in data["table"]:
        assert row["operations"] > 0 and row["strong"] > 0, row
    segments = data["segments"]
    assert all((tmp_path / "soak" / "segments").glob("*.jsonl.gz"))
    assert len(list((out / "segments").glob("*.jsonl.gz"))) == len(segments)
    assert len(list((out / "segments").glob("*.strong.pickle.gz"))) == len(segments)  # strong ones too
    assert {s["kind"] for s in segments} == set(KINDS)
    assert not any(s["nemesis_errors"] for s in segments), [s["nemesis_errors"] for s in segments]
    not_done = [(s["nemesis"], s["applied"]) for s in segments if s["nemesis"] not in s["applied"]]
    assert not not_done, not_done
    assert sum(s["failed_calls"] for s in segments) > 0  # the faults were felt by the clients
    assert {s["strong_mode"] for s in segments} == {"vivace", "token"}
    # where the time went, for the next person to cut it: every phase of every segment, and the legs
    assert {"sessions", "quiescing", "checking"} <= set(segments[0]["phases"]), segments[0]["phases"]
    assert set(data["overhead_s"]) == {"starting clusters", "stopping clusters"}
    assert 0 < data["peak_mb"] < 2048  # memory stays flat: one segment at a time
    assert "time spent: starting clusters" in done.stdout + done.stderr
