"""A full store (loadtest/check/nemesis.py's ``store-full``: a master at its memory limit): a
write is refused with ``StoreFull``, a typed, retryable error that says so, and nothing of it is
written; reads go on; once the store has room, writes go through again with nobody restarting
anything, and a checked run under the fault loses nothing."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.waiting import eventually, unique

from causal_client import CausalClient, StoreFull
from causal_client.errors import retryable_errors
from loadtest.check.nemesis import full_store

pytestmark = pytest.mark.cluster


def test_a_write_to_a_full_store_is_refused_by_type_and_goes_through_once_there_is_room(launch):
    cluster = launch("two-region.toml", protocol="saturn")
    with CausalClient.connect(cluster.topology.client_address("a")) as client:
        session = client.session("a")
        kept, refused = unique("kept"), unique("refused")
        session.write("all", kept, {"v": "before"})
        with full_store(cluster.topology, "a"):
            with pytest.raises(StoreFull, match=r"the store is full .*nothing was written"):
                session.write("all", refused, {"v": "while full"})
            assert StoreFull in retryable_errors()
            assert session.read("all", kept).text("v") == "before"  # reads go on
        assert not session.read("all", refused).cells  # nothing of the refused write
        session.write("all", refused, {"v": "after"})  # the same session, nothing restarted
        assert session.read("all", refused).text("v") == "after"


def test_a_store_whose_disk_is_nearly_full_refuses_writes_by_type_and_takes_them_once_there_is_room(tmp_path):
    """The append-only file's disk (a small filesystem of its own): with less than
    ``[store] min_free_mb`` free, writes are refused with StoreFull (Redis would exit on a failed
    append under appendfsync always); once the filler is gone, they go through again."""
    from helpers.topologies import load_topology

    from loadtest.harness.cluster import find_base_port, with_overrides
    from services.launcher.cluster import Cluster

    topology = load_topology("two-region.toml", protocol="saturn")
    store = topology.store.model_copy(update={"min_free_mb": 16})
    topology = with_overrides(topology, store=store.model_dump())
    topology = with_overrides(topology, base_port=find_base_port(topology))
    cluster = Cluster(topology, tmp_path / "run")
    disk = cluster.data_dir / "a-0"
    disk.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {mounted.stderr.decode().strip()}")
    try:
        with cluster, CausalClient.connect(topology.client_address("a")) as client:
            session = client.session("a")
            session.write("all", unique("before"), {"v": "room"})
            filler = disk / "filler"
            free = shutil.disk_usage(disk).free
            subprocess.run(["fallocate", "-l", str(free - (8 << 20)), str(filler)], check=True)
            refused: list[str] = []  # rows whose write was refused (free space is read every 200 ms)
            eventually(lambda: _refused(session, refused), timeout=5)
            assert not session.read("all", refused[-1]).cells
            filler.unlink()
            eventually(lambda: not _refused(session, refused), timeout=5)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _refused(session, refused: list[str]) -> bool:
    row = unique("row")
    try:
        session.write("all", row, {"v": "now"})
    except StoreFull as exc:
        assert "a disk it cannot write" in str(exc) and "less than 16 MB free" in str(exc)
        refused.append(row)
        return True
    assert session.read("all", row).text("v") == "now"
    return False
