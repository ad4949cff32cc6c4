"""docker-compose projects generated from a topology (``python -m services.compose``)."""
