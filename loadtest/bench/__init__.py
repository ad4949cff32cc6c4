"""Benchmark: what the causal layer costs next to raw Redis, and how fast remote updates show up.

    python -m loadtest.bench                                   # demo-3region, 8 clients, 10 s a phase
    python -m loadtest.bench --topology topologies/two-region.toml --clients 4 --duration 5
    python -m loadtest.bench --protocols eventual,saturn       # one full run per protocol
    python -m loadtest.bench --attach --topology topologies/demo-3region.toml   # an already running one

For each protocol, one run:

1. starts the topology with the project's launcher on a free block of ports (``--base-port`` to
   choose it), or with ``--attach`` measures the cluster already running at the topology's ports;
2. closed-loop load from ``--clients`` threads, each with its own session attached to one region
   (``--region``, default the first): causal reads, causal writes and a 9:1 read:write mix through
   ``causal_client``, each next to the same operations done by redis-py straight against that
   region's Redis (HGET/HSET of a value of the same size, the shape of a stored cell). The ratio
   causal/raw is the price of the causal layer (gRPC frontend, labels, Lua gear, replication log)
   on the same machine. Every phase is warmed up first (connections, pools, caches);
3. remote-update visibility: each region in turn writes at a moderate rate to the all-replicated
   group; each region's ``causal_visibility_seconds{region,origin}`` histogram (from its /metrics) gives,
   per region pair, how long an update took from applied at its origin to visible remotely, next
   to the configured one-way latency of the link. The same is shown for the load phases' writes;
4. prints aligned tables and writes ``<out>/<topology>.json`` and ``<out>/<topology>.png``.

What it writes (mind it with --attach): rows ``bench:<i>`` and ``probe:<region>:<i>`` (column
``v``) in ``--group``, and hashes ``bench-raw:<i>`` straight into the load region's first Redis.

Everything it started is stopped on the way out, Ctrl-C included. Exit status: 0, 1 when a protocol
could not be measured (e.g. not implemented yet: the services' own error is printed), 2 on bad
arguments, 130 when interrupted.
"""

from loadtest.bench.cli import main
from loadtest.bench.metrics import parse_visibility
from loadtest.bench.results import OPS
from loadtest.bench.stats import Histogram, percentile

__all__ = ["OPS", "Histogram", "main", "parse_visibility", "percentile"]
