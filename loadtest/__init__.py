"""Load, measurement and checking, on top of everything else (nothing imports this package):

- ``python -m loadtest run``: the paper's Facebook workload on Chirp with Locust (graph.py,
  placement.py, plan.py, population.py, actors.py, run.py, summary.py);
- ``python -m loadtest check``: random histories under faults, checked for causality (check/);
- ``python -m loadtest soak --ops N``: every protocol, topology kind and fault until N operations
  are checked (check/soak.py);
- ``python -m loadtest paper FIG``: the paper's figures, one command each (paper.py);
- ``python -m loadtest bench NAME``: one registered experiment (``bench --list``): the store's
  throughput and visibility per protocol, the micro-benchmarks beside it (bench/).
"""
