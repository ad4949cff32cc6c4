"""Template helpers: tweet times and dictionary lookups."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

register = template.Library()


@register.filter
def tweet_time(time_us: int) -> str:
    """µs since the epoch as a short UTC time."""
    return datetime.fromtimestamp(time_us / 1e6, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def lookup(mapping: dict | None, key: str):
    return (mapping or {}).get(key)
