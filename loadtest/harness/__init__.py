"""What every experiment shares: the cluster it starts (cluster.py), its options (options.py),
closed-loop load (loop.py), probe writes and visibility (probes.py, visibility.py, metrics.py),
latency statistics (stats.py), CPU per role (cpu.py), tables, JSON and plots (report.py,
results.py), and the registry of experiments (registry.py) that ``python -m loadtest bench`` and
``python -m loadtest paper`` read. The experiments themselves are modules of loadtest/bench/."""
