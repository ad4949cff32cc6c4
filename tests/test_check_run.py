"""`python -m loadtest check` end to end: the self-check (under `eventual` on a topology with skewed
latencies the checker finds violations, so a clean run means something). `saturn` under every
fault the nemesis knows, on standalone and cluster stores, with strong operations beside the
causal ones, is the CI soak's (tests/test_soak.py)."""

from __future__ import annotations

import json

import pytest
from helpers.topologies import TOPOLOGIES

from loadtest.cli import main

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it


def run(tmp_path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out"
    code = main(["check", "--topology", str(TOPOLOGIES / "causality-3region.toml"), "--out", str(out), *args])
    return code, json.loads((out / "check.json").read_text())


def test_the_checker_catches_eventual(tmp_path, capsys):
    code, data = run(tmp_path, "--protocol", "eventual", "--duration", "15")
    assert code == 1
    assert data["violations"]["WriteCORead"] + data["violations"]["WriteCOInitRead"] > 0, data["violations"]
    assert data["violations"]["ThinAirRead"] == 0 and data["violations"]["CyclicCO"] == 0
    assert data["converged"] and not data["lost_writes"]  # eventual converges: it only reorders
    assert "chain:" in capsys.readouterr().out  # an excerpt shows how the read depends on the write
    assert (tmp_path / "out" / "check.png").stat().st_size > 10_000
