"""Load, measurement and checking, on top of everything else (nothing imports this package):

- ``python -m loadtest run``: the paper's Facebook workload on Chirp with Locust (graph.py,
  placement.py, plan.py, population.py, actors.py, run.py, summary.py);
- ``python -m loadtest check``: random histories under faults, checked for causality (check/);
- ``python -m loadtest paper FIG``: the paper's figures, one command each (paper.py, fig8.py);
- ``python -m loadtest.bench``: the store's throughput and visibility per protocol, and the
  micro-benchmarks beside it (bench/).
"""
