"""Prometheus metrics of a region: throughput and remote-update visibility latency.

A region runs several processes (frontends, bulk receiver, ...), so metrics use
prometheus_client's multiprocess mode: each process writes to the region's
``PROMETHEUS_MULTIPROC_DIR`` and one HTTP endpoint per region serves the sum.
"""

from __future__ import annotations

import bisect
import collections
import glob
import hmac
import itertools
import logging
import os
import re
import ssl
import threading
from collections.abc import Sequence
from wsgiref.simple_server import WSGIRequestHandler, make_server

import redis
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    make_wsgi_app,
    multiprocess,
)
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from causal_client import tls
from causal_client.tls import HANDSHAKE_TIMEOUT_S
from services import auth
from services.pids import pid_alive
from services.region import gears
from services.region.sync_shard import SyncShard

log = logging.getLogger("metrics")

# Fine buckets: the benchmark estimates percentiles of visibility latency from them.
VISIBILITY_BUCKETS = tuple(
    [x / 1000 for x in (0.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 18, 20, 25, 30, 35, 40)]
    + [x / 1000 for x in range(45, 200, 5)]
    + [x / 1000 for x in (200, 220, 240, 260, 280, 300, 350, 400, 500, 750)]
    + [1.0, 2.0, 5.0, 10.0, 30.0]
)

OPS = Counter("causal_ops_total", "Client operations served", ["region", "op"])
OP_ERRORS = Counter(
    "causal_op_errors_total", "Client operations rejected or failed", ["region", "op", "code"]
)
REMOTE_APPLIED = Counter(
    "causal_remote_updates_applied_total", "Remote updates made visible here", ["region", "origin"]
)
VISIBILITY = Histogram(
    "causal_visibility_seconds",
    "Remote-update visibility latency: visible here minus applied at origin",
    ["region", "origin"],
    buckets=VISIBILITY_BUCKETS,
)
BULK_SENT = Counter(
    "causal_bulk_payloads_sent_total", "Payloads shipped by bulk transfer", ["region", "destination"]
)
BULK_HEARTBEATS = Counter(
    "causal_bulk_heartbeats_sent_total",
    "Empty batches bulk transfer sent because the destination asked for them (timestamp order)",
    ["region", "destination"],
)
LABELS_RECEIVED = Counter(
    "causal_labels_received_total",
    "Saturn labels delivered to this region's remote proxy by the tree, by origin and type",
    ["region", "origin", "type"],
)
LABELS_SENT = Counter(
    "causal_labels_sent_total", "Labels this region's sink sent up the tree, by type", ["region", "type"]
)
LABEL_MESSAGES_SENT = Counter(
    "causal_label_messages_sent_total",
    "Messages this region's sink sent up the tree (labels per message = labels sent / this)",
    ["region"],
)
PROXY_REORDERED = Counter(
    "causal_proxy_reordered_total",
    "Saturn labels delivered ahead of an earlier one still waiting for its payload (§4.4)",
    ["region"],
)
PROXY_MARKING = Gauge(
    "causal_proxy_marking_labels",
    "Saturn remote proxy: 1 while labels made here are marked (updates applied outside the tree's "
    "order, their labels not all here yet: receivers wait for them to be stable)",
    ["region"],
    multiprocess_mode="liveall",
)
PROXY_MODE = Gauge(
    "causal_proxy_tree_mode",
    "Saturn remote proxy: 1 while applying in the tree's order, 0 in timestamp order (tree down)",
    ["region"],
    multiprocess_mode="liveall",
)
PROXY_EPOCH = Gauge(
    "causal_proxy_tree_epoch",
    "Saturn remote proxy: the epoch of the tree whose labels it delivers (online reconfiguration)",
    ["region"],
    multiprocess_mode="liveall",
)
BULK_RECEIVED = Counter(
    "causal_bulk_payloads_received_total", "Payloads received by bulk transfer", ["region", "origin"]
)


def observe_many(histogram: Histogram, values: list[float]) -> None:
    """``histogram.observe(v)`` for every value, with one write per bucket touched instead of two
    per value: in multiprocess mode each is a write to a memory-mapped file, and a remote proxy
    observes every update's visibility (a tenth of its CPU, one by one). Reaches into the child's
    buckets as ``observe`` does; falls back to it where they are not there."""
    buckets, bounds, total = (getattr(histogram, a, None) for a in ("_buckets", "_upper_bounds", "_sum"))
    if buckets is None or bounds is None or total is None:
        for value in values:
            histogram.observe(value)
        return
    total.inc(sum(values))
    for index, count in collections.Counter(bisect.bisect_left(bounds, value) for value in values).items():
        buckets[index].inc(count)


_LIVE_GAUGE_FILE = re.compile(r"gauge_live[a-z]+_(\d+)\.db")


def forget_dead_processes(path: str) -> None:
    """Removes the files of live-mode gauges (``causal_proxy_tree_mode``) whose process is gone.
    prometheus_client keeps them until someone calls ``mark_process_dead``, which a killed
    process never does: a region whose receiver was killed and restarted would serve the dead
    one's gauge next to the new one's. Counters and histograms of dead processes stay: their
    counts happened."""
    for file in glob.glob(os.path.join(path, "gauge_live*_*.db")):
        match = _LIVE_GAUGE_FILE.fullmatch(os.path.basename(file))
        if match and not pid_alive(int(match.group(1))):
            multiprocess.mark_process_dead(int(match.group(1)), path)


class _RegionCollector(multiprocess.MultiProcessCollector):
    """The region's processes summed, as every scrape should see them: without the gauges of dead
    processes, and skipping metric files too short to hold a header (a process killed while
    creating one leaves it empty, and prometheus_client would otherwise fail every scrape)."""

    def collect(self):
        forget_dead_processes(self._path)
        files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if os.path.getsize(f) >= 8]
        return self.merge(files, accumulate=True)


class AttachWaits:
    """``causal_attach_wait_seconds``: how long attaches waited for the client's causal past to
    be visible here, by the label's origin region and kind (a migration label's wait is the
    migration latency of §4.3). Clients attach through the gears, directly or through the
    gateway, and the attach gear counts each wait in the store (attach.lua); a scrape reads them."""

    NAME = "causal_attach_wait_seconds"

    def __init__(self, region: str, shard: SyncShard, waits_key: str):
        """``shard``: where the attach gear keeps its counts (``waits_key``: that shard's
        ``gears.ATTACH_WAITS_KEY``), followed wherever a Redis Cluster moves it."""
        self.region = region
        self.waits_key = waits_key
        self.shard = shard

    def collect(self):
        family = HistogramMetricFamily(
            self.NAME, "How long attaches waited for the client's causal past to be visible here",
            labels=["region", "origin", "kind"],
        )  # fmt: skip
        try:
            raw = self.shard.run(lambda store: store.hgetall(self.waits_key))
        except redis.RedisError:
            return [family]  # the store is down: its counts come back with it
        fields = {k.decode(): int(v) for k, v in raw.items()}
        for prefix in sorted({f.rsplit("|", 1)[0] for f in fields}):
            origin, kind = prefix.split("|", 1)
            counts = [fields.get(f"{prefix}|b{i + 1}", 0) for i in range(len(gears.ATTACH_BUCKETS_S))]
            cumulative = list(itertools.accumulate(counts))
            buckets = [(str(b), c) for b, c in zip(gears.ATTACH_BUCKETS_S, cumulative, strict=True)]
            buckets.append(("+Inf", fields.get(f"{prefix}|count", 0)))
            family.add_metric([self.region, origin, kind], buckets, fields.get(f"{prefix}|sum_us", 0) / 1e6)
        return [family]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # scrapes are not news
        pass


class _TlsWSGIServer(ThreadingWSGIServer):
    """The metrics server under the deployment's TLS: each connection's handshake runs in its
    own thread (a slow or wrong client holds no one else up), and one that fails is logged
    with its cause and dropped."""

    context: ssl.SSLContext

    def finish_request(self, request, client_address) -> None:
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            secured = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            where = f"a client at {client_address[0]}:{client_address[1]}"
            log.warning("metrics: a TLS handshake failed: %s", tls.explain(exc, where))
            return
        secured.settimeout(None)
        super().finish_request(secured, client_address)


def _with_secret(app, secret: str):
    """The WSGI app, answering 401 to a scrape without ``Authorization: Bearer <secret>``
    (Prometheus sends one with ``authorization: {credentials: ...}`` in its scrape config)."""
    expected = f"Bearer {secret}".encode()

    def guarded(environ, start_response):
        if hmac.compare_digest(environ.get("HTTP_AUTHORIZATION", "").encode(), expected):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
        return [b"missing or wrong credentials\n"]

    return guarded


def serve(port: int, host: str = "127.0.0.1", collectors: Sequence[Collector] = ()) -> None:
    """Serves /metrics in a thread, summing every process of the region when in multiprocess
    mode, plus ``collectors`` (read at each scrape); with the deployment's secret set, only to
    scrapes that present it (services/auth.py)."""
    auth.require_for(host, f"the metrics endpoint on port {port}")
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _RegionCollector(registry)
    for collector in collectors:
        registry.register(collector)
    app = make_wsgi_app(registry)
    secret = auth.secret()
    if secret:
        app = _with_secret(app, secret)
    files = tls.from_env()
    if files is None:
        server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    else:
        secured = type("MetricsOverTls", (_TlsWSGIServer,), {"context": tls.server_context(files)})
        server = make_server(host, port, app, secured, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
