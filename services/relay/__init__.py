"""The relay process of a link with a bandwidth (``python -m services.relay.relay``): a service
of its own above the WAN emulation (``services.wan``), which stays a ground floor that every
process reads and that imports nothing of the services."""
