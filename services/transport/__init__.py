"""The link transport: how the system's own processes talk to each other (label sinks,
serializers and remote proxies; C3's direct links; bulk payloads and their acknowledgements; a
serializer replica group's log; health), framed and authenticated over plain TCP.

gRPC stays where it serves clients and operators (the gateway). Chosen by measurement: a
Python gRPC stream costs 100-200 µs of CPU per message, this transport about a tenth of it
(``python -m loadtest bench transport``; docs/OPERATIONS.md, "How the processes talk").

Import from the modules: ``server`` (LinkServer), ``client`` (open_link), ``connection``,
``errors``; ``probe`` (a blocking health check) imports nothing heavy, for containers' checks.
"""
