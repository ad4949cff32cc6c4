"""The experiments, one module each: every module that defines ``EXPERIMENT`` is registered in
loadtest/harness/registry.py and runs as ``python -m loadtest bench NAME`` (``bench --list``
shows them all with their expected minutes). The other modules here are pieces one experiment
family shares (the throughput bench's measure/compare/workload, the visibility figures)."""
