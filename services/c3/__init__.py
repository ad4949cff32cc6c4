"""C3 (Fouto, Leitão, Preguiça): labels sent directly between regions, with dependency
vectors (docs/ARCHITECTURE.md, "C3")."""
