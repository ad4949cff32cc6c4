"""Consistency protocols as plug-ins over one data path (docs/ARCHITECTURE.md, "Protocols")."""

from services.protocols.base import Protocol, protocol_for

__all__ = ["Protocol", "protocol_for"]
