"""Bulk transfer is exactly-once across crashes: SIGKILL the receiver, the sender, or both,
in the middle of a stream of updates, and region b still ends up with every update, once.

Every update i of the stream sets its own column ``u<i>`` (so a lost update shows as a missing
column) and increments a counter of its row (the total must be exactly N * INC in both regions).
Counters replicate as partial sums (state, last-writer-wins by label) and cells are LWW too, so a
re-applied update leaves the data unchanged by design: a double apply is caught instead by b's
``causal_remote_updates_applied_total`` (apply.lua reports only the updates it applied), which
must never exceed N.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis
from helpers.clusters import applied_count, bulk_stream_length
from helpers.deadlines import Deadline
from helpers.topologies import load_topology
from helpers.waiting import eventually, unique

from causal_client import CausalClient, Mutation, ReadSpec, wire
from services.bulk.sender import Trimmer
from services.bulk.tail import READ_COUNT
from services.launcher.cluster import Cluster
from services.region import gears
from services.region.store import Shard

pytestmark = pytest.mark.cluster  # starts processes: `pytest -m 'not cluster'` skips it

N = 2000  # updates a stream writes at least (it goes on until the test has done its kills)
LIMIT = 200_000  # a stream never writes more than this
INC = 3  # each update adds INC to its row's counter
ROWS = 4  # the stream's updates are spread over this many rows
GROUP = "all"  # replicated at a and b
COUNTER = "n"
SHARD = wire.shard_tag(0)  # the one shard of the stores these tests fill by hand
SETTLE_S = 0.3  # after a kill: let whatever was already in flight land (a fixed time: a receiver
# says nowhere that it has taken the last of a dead sender's connection)
DOWN_S = 0.5  # how long the killed side stays down (the writer goes on meanwhile): a window
RECEIVER, SENDER = "b.bulk-receiver", "a.bulk-sender"


def column(i: int) -> str:
    return f"u{i:05d}"


def value(i: int) -> str:
    return f"v{i}-{i * 7919 % 10007}"


class Stream:
    """A writer thread: distinct updates in region a, one after the other, as fast as it can, until
    finish() (so that however fast the machine, the writer is still going when the test kills)."""

    def __init__(self, client: CausalClient, minimum: int = N):
        self.minimum = minimum
        self.n = 0  # updates written in all, known once finished
        self.rows = [unique(f"crash-r{k}") for k in range(ROWS)]
        self.session = client.session("a")
        self.written = 0  # updates acknowledged by region a
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="stream-writer", daemon=True)

    def row_of(self, i: int) -> str:
        return self.rows[i % ROWS]

    def _run(self) -> None:
        try:
            for i in range(LIMIT):
                if self._stop.is_set() and i >= self.minimum:
                    return
                self.session.apply(
                    Mutation(GROUP, self.row_of(i)).set(column(i), value(i)).increment(COUNTER, INC)
                )
                self.written = i + 1
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def start(self) -> Stream:
        self.thread.start()
        return self

    def finish(self, more: int = 200, timeout: float = 120.0) -> None:
        """Lets the writer do ``more`` updates (after a restart: shipping must resume with new
        writes too), then stops it."""
        target = self.written + more
        deadline = Deadline(timeout, f"{more} more updates, then the writer stopped")
        while self.written < target and self.thread.is_alive() and not deadline.expired():
            time.sleep(0.01)
        self._stop.set()
        self.thread.join(deadline.left())
        if self.thread.is_alive():
            raise deadline.fail(f"writer stuck after {self.written} updates")
        deadline.met()
        assert self.error is None, f"writer failed after {self.written} updates: {self.error!r}"
        assert self.written >= self.minimum
        self.n = self.written

    def running(self) -> bool:
        return self.thread.is_alive() and not self._stop.is_set()


def applied_in(session, stream: Stream) -> int:
    """How many of the stream's updates a region has applied, from its counters."""
    rows = session.multi_read([ReadSpec(GROUP, row, (COUNTER,)) for row in stream.rows])
    total = sum(row.counter(COUNTER) for row in rows)
    assert total % INC == 0, f"counter total {total} is not a multiple of {INC}"
    return total // INC


def check_complete(client: CausalClient, stream: Stream) -> None:
    """Every update present exactly once in both regions: all columns, right values, exact total."""
    expected: dict[str, dict[str, bytes]] = {row: {} for row in stream.rows}
    for i in range(stream.n):
        expected[stream.row_of(i)][column(i)] = value(i).encode()
    for region in ("a", "b"):
        session = client.session(region)
        total = 0
        for row in stream.rows:
            got = session.read(GROUP, row)
            cells = got.as_dict()
            missing = sorted(set(expected[row]) - set(cells))
            assert not missing, f"{region}/{row}: {len(missing)} updates lost, e.g. {missing[:5]}"
            assert cells == expected[row], f"{region}/{row}: wrong or extra cells"
            assert got.counter(COUNTER) == INC * len(expected[row]), f"{region}/{row}: counter"
            total += got.counter(COUNTER)
        assert total == INC * stream.n, f"{region}: counter total {total} != {INC * stream.n}"


def kill_mid_stream(cluster: Cluster, names: list[str], stream: Stream, reader) -> int:
    """SIGKILLs ``names`` while the writer is running; checks the kill really froze shipping and
    that the stream keeps what b has not acknowledged. Returns how many updates b had."""
    assert stream.running(), f"writer stopped ({stream.written} written) before the kill"
    for name in names:
        cluster.kill(name)
    time.sleep(SETTLE_S)
    at_kill = applied_in(reader, stream)
    assert at_kill > 0, "kill before b had anything"
    time.sleep(DOWN_S)
    written = stream.written
    length = bulk_stream_length(cluster, "a")
    assert applied_in(reader, stream) == at_kill, "b kept applying with a side of bulk transfer dead"
    assert written > at_kill, "the writer made no progress while bulk transfer was down"
    # Entries b has not applied (hence not acknowledged) must not have been trimmed.
    assert length >= written - at_kill, f"stream has {length} entries, b is missing {written - at_kill}"
    return at_kill


def converge_and_check(cluster: Cluster, client: CausalClient, stream: Stream, receiver_kills: int) -> None:
    stream.finish()
    reader = client.session("b")
    eventually(lambda: applied_in(reader, stream) == stream.n, timeout=60, interval=0.1)
    check_complete(client, stream)
    applied = applied_count(cluster, "b", "a", at_least=stream.n - READ_COUNT * receiver_kills)
    assert applied <= stream.n, f"b applied {applied:.0f} remote updates for {stream.n} writes: doubled"
    # A receiver SIGKILLed after the store applied a batch but before it counted it misses that
    # one batch in its count; nothing else may be missing.
    uncounted = stream.n - applied
    assert uncounted <= READ_COUNT * receiver_kills, f"b counted only {applied:.0f} of {stream.n}"
    # Everything is acknowledged, so the trimmer (every 1 s) empties a's stream.
    eventually(lambda: bulk_stream_length(cluster, "a") == 0, timeout=10, interval=0.1)


@pytest.fixture
def cluster(launch) -> Cluster:
    return launch("two-region.toml")


@pytest.fixture
def client(cluster: Cluster, client_for) -> CausalClient:
    return client_for(cluster)


def test_receiver_killed_mid_stream(cluster, client):
    reader = client.session("b")
    stream = Stream(client).start()
    eventually(lambda: applied_in(reader, stream) >= N // 10, timeout=30)
    kill_mid_stream(cluster, [RECEIVER], stream, reader)
    cluster.restart(RECEIVER)
    converge_and_check(cluster, client, stream, receiver_kills=1)


def test_sender_killed_mid_stream(cluster, client):
    reader = client.session("b")
    stream = Stream(client).start()
    eventually(lambda: applied_in(reader, stream) >= N // 10, timeout=30)
    kill_mid_stream(cluster, [SENDER], stream, reader)
    cluster.restart(SENDER)
    # The receiver never died, so its count is exact: every update applied exactly once.
    converge_and_check(cluster, client, stream, receiver_kills=0)


def test_both_sides_killed_repeatedly(cluster, client):
    reader = client.session("b")
    stream = Stream(client, 2 * N).start()
    floor, kills = N // 10, []
    for k in range(3):
        # Kill only once b has made progress since the last restart: shipping really resumed.
        eventually(lambda floor=floor: applied_in(reader, stream) >= floor, timeout=30)
        order = [RECEIVER, SENDER] if k % 2 == 0 else [SENDER, RECEIVER]
        kills.append(kill_mid_stream(cluster, order, stream, reader))
        for name in (RECEIVER, SENDER):
            cluster.restart(name)
        floor = kills[-1] + 20
    assert kills == sorted(set(kills)), f"no progress between kills: {kills}"
    converge_and_check(cluster, client, stream, receiver_kills=3)


def test_the_trimmer_empties_a_backlog_longer_than_one_approximate_trim(redis_url):
    """A sender down for a while leaves a long backlog; once acknowledged it must all go. An
    approximate XTRIM deletes at most 10,000 entries a call, and the trimmer does not trim twice
    for the same position: it left the rest for good (found when clients got faster)."""
    backlog = 25_000
    BULK = gears.shard_key(gears.BULK_STREAM, SHARD)
    with redis.Redis.from_url(redis_url) as store:
        pipe = store.pipeline(transaction=False)
        for ts in range(1, backlog + 1):
            pipe.xadd(BULK, {"g": "all", "p": b"x" * 100}, id=f"{ts}-0")
        pipe.execute()
        trimmer = Trimmer(load_topology("two-region.toml"), "a", ["b"])
        trimmer.shards["a/0"] = Shard(redis_url, "a/0", "a", SHARD)  # region a's store is this one
        trimmer.acked("a/0", "b", backlog)

        async def one_pass() -> None:
            stop = asyncio.Event()
            # Not a deadline: a stop only cuts the trimmer's sleep short, and the pass after its
            # first sleep runs whole whenever the stop comes.
            asyncio.get_running_loop().call_later(0.5, stop.set)
            await trimmer.run(stop, period_s=0.1)

        asyncio.run(one_pass())
        assert store.xlen(BULK) == 0
