"""The Facebook-derived load test on Chirp (``python -m loadtest run``): a social graph
(graph.py) placed over regions (placement.py) into a plan (plan.py) and a population
(population.py); actors (actors.py) run the operation mix (mix.py) through Locust
(locustfile.py, locust_run.py, run.py); summary.py and summary_plot.py report it, and
topology_file.py writes the topologies it runs on."""
