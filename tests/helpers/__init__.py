"""What tests share besides fixtures (those are in conftest.py): topologies on free ports
(``topologies``), clusters and their metrics (``clusters``), waiting (``waiting``), a browser over
HTTP (``http_browser``), the web tier's clusters and in-process Django (``web``), Docker engines of
the tests' own (``docker_engine``) and the guard behind the ``cluster`` marker (``process_guard``).
"""
