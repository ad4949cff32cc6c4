"""The configuration generator (paper §5, Algorithm 3): `python -m services.configure`."""
