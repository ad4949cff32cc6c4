"""The experiment harness (loadtest/harness/): one registry that ``python -m loadtest bench``,
``bench --list`` and ``python -m loadtest paper`` read, shared options, exit codes that say
passed / failed / could not run, one entry point under loadtest/, and the docs' table of
experiments generated from the registry."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.deadlines import scaled

from loadtest import paper
from loadtest.cli import main as loadtest_main
from loadtest.harness import registry
from loadtest.harness.experiment import Experiment

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(registry, "MODULES", (*registry.MODULES, "helpers.toy_experiment"))
    return registry.experiment("toy-experiment")


def test_every_registered_module_declares_its_experiment():
    found = registry.experiments()
    assert [e.name for e in found] == registry.names()
    for e in found:
        assert isinstance(e, Experiment)
        assert 0 < e.minutes[0] <= e.minutes[1], e.name
        assert e.summary and len(e.summary) <= 110 and "\n" not in e.summary, e.name


def test_a_toy_experiment_is_one_module_and_one_entry(toy, tmp_path, capsys):
    out = tmp_path / "toy"
    assert (
        loadtest_main(["bench", "toy-experiment", "--out", str(out), "--protocols", "c3", "--rounds", "3"])
        == 0
    )
    assert json.loads((out / "toy.json").read_text()) == {"rounds": 3, "protocols": ["c3"]}
    machine = json.loads((out / "machine.json").read_text())  # every experiment says where it ran
    assert machine["cores"] >= 1 and f"machine: {machine['cores']} cores" in capsys.readouterr().out
    assert loadtest_main(["bench", "toy-experiment", "--out", str(out), "--outcome", "fail"]) == 1
    assert loadtest_main(["bench", "toy-experiment", "--out", str(out), "--outcome", "cannot"]) == 2
    assert "the toy cannot run as asked" in capsys.readouterr().err
    assert "toy-experiment" in registry.listing()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--protocols", "nope"], "unknown protocol nope"),
        (["--rounds", "0"], "must be > 0"),
        ([], "the following arguments are required: --out"),
    ],
)
def test_shared_options_are_checked_the_same_way_everywhere(toy, argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        registry.run("toy-experiment", argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_an_unknown_experiment_is_named(capsys):
    assert loadtest_main(["bench", "nope"]) == 2
    assert "no experiment 'nope'" in capsys.readouterr().err


@pytest.mark.cluster  # a process of its own: the command as typed
def test_bench_list_names_every_experiment_with_its_minutes():
    listed = subprocess.run(
        [sys.executable, "-m", "loadtest", "bench", "--list"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=scaled(60),
    )
    assert listed.returncode == 0, listed.stderr
    for name in registry.names():
        assert re.search(rf"^{re.escape(name)}\s+[\d.]+ / [\d.]+\s", listed.stdout, re.M), name


def test_the_paper_command_reads_the_registry():
    figures = paper.figures()
    assert {"fig1", "fig4", "fig5", "fig6", "fig7", "fig8", "c3", "vivace", "redblue"} <= set(figures)
    assert all(f.paper is not None for f in figures.values())


def test_loadtest_has_one_entry_point():
    """``python -m loadtest`` (plus Locust's locustfile): no module runs as a script of its own."""
    mains = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "loadtest").rglob("__main__.py"))
    scripts = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "loadtest").rglob("*.py")
        if re.search(r"^if __name__ == .__main__.:", p.read_text(), re.M)
    )
    assert (mains, scripts) == (["loadtest/__main__.py"], [])


def test_the_docs_table_of_experiments_is_the_registry_s():
    """docs/BENCHMARKS.md holds ``python -m loadtest bench --list --markdown`` between its markers;
    after adding an experiment, paste that command's output there."""
    text = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    table = text.split("<!-- bench-list:start -->")[1].split("<!-- bench-list:end -->")[0].strip()
    assert table == registry.listing(markdown=True)
