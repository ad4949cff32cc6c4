"""Load generation and measurement for the store: ``python -m loadtest.bench`` (see its docstring)."""
