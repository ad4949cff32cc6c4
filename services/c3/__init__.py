"""C3 (Fouto, Leitão, Preguiça): labels sent directly between regions, with dependency
vectors (docs/PROTOCOLS.md, "C3")."""
