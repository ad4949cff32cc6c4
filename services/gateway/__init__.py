"""A region's gRPC gateway (``frontend.py``): the public ``Store`` service for clients that cannot
reach the stores, above the region's store and the protocols' hooks."""
