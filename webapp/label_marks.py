"""The highest causal label each browser session has reached at this region.

Two tabs of one session race: each request resumes from the cookie it was sent and stores the
token it ends with, and the browser keeps whichever response came last, which may be the older
label. A lower label loses nothing at this region (what was visible here stays visible), but it
is what the next travel hand-off carries: the destination would then not wait for what the other
tab had seen. So each session family's token is also kept here, in the region's broker Redis, and
merged by maximum (an optimistic transaction) whenever a request stores one; a request resumes
from the greater of its cookie's and this one. A broker that is down costs the merge, not the
request: the cookie alone serves, and the marks are not tried again for a few seconds.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

from causal_client import CausalError, LabelType, SessionToken, tls

log = logging.getLogger("webapp.label_marks")

TTL_S = 14 * 24 * 3600  # as long as a session cookie
PAUSE_AFTER_FAILURE_S = 5.0
OPTIONS = {"socket_connect_timeout": 0.5, "socket_timeout": 1.0}


def later_token(stored: str | None, incoming: str | None) -> str | None:
    """A token covering both. Two tokens of one region merge (vectors included). A migration
    label for region R covers a token of R whose label is not above it (that past is visible at
    R already, and stays). Otherwise a label says nothing of where its past is visible, so the
    greater label goes alone, bare and plain (``Label.as_past``): the next request attaches with
    it and waits until every origin has passed it, never less."""
    if not stored or not incoming or stored == incoming:
        return incoming or stored
    try:
        old, new = SessionToken.parse(stored), SessionToken.parse(incoming)
    except CausalError:
        return incoming
    if old.region and old.region == new.region:
        return SessionToken(old.label.merge(new.label), old.region).encode()
    for migration, other in ((old, new), (new, old)):
        label = migration.label
        if (not migration.region and label.type == LabelType.MIGRATION and other.region == label.target
                and other.label <= label):  # fmt: skip
            return migration.encode()
    return old.label.merge(new.label).as_past().to_token()


class LabelMarks:
    """One region's marks (a process keeps one per broker URL: ``for_broker``)."""

    _made: dict[str, LabelMarks] = {}
    _lock = threading.Lock()

    def __init__(self, broker_url: str):
        self.client = redis.Redis.from_url(broker_url, **OPTIONS, **tls.redis_url_options(broker_url))
        self.paused_until = 0.0

    @classmethod
    def for_broker(cls, broker_url: str) -> LabelMarks:
        with cls._lock:
            if broker_url not in cls._made:
                cls._made[broker_url] = cls(broker_url)
            return cls._made[broker_url]

    @staticmethod
    def key(family: str) -> str:
        return f"webapp:label:{family}"

    def _usable(self) -> bool:
        return time.monotonic() >= self.paused_until

    def _failed(self, exc: Exception) -> None:
        log.warning("label marks unavailable (%s); cookies alone for %.0fs", exc, PAUSE_AFTER_FAILURE_S)
        self.paused_until = time.monotonic() + PAUSE_AFTER_FAILURE_S

    def get(self, family: str) -> str | None:
        if not self._usable():
            return None
        try:
            value = self.client.get(self.key(family))
        except redis.RedisError as exc:
            self._failed(exc)
            return None
        return _text(value)

    def merge(self, family: str, token: str) -> str:
        """Stores the greater of ``token`` and the family's mark; returns it."""
        if not self._usable():
            return token
        key = self.key(family)
        try:
            with self.client.pipeline() as pipe:
                while True:
                    try:
                        pipe.watch(key)
                        stored = pipe.get(key)
                        merged = later_token(_text(stored), token) or token
                        pipe.multi()
                        pipe.set(key, merged, ex=TTL_S)
                        pipe.execute()
                        return merged
                    except redis.WatchError:
                        continue  # another tab stored one meanwhile: merge with it
        except redis.RedisError as exc:
            self._failed(exc)
            return token


def _text(value: bytes | str | None) -> str | None:
    """A stored mark as text (the connection decodes replies or not)."""
    if not value:
        return None
    return value.decode() if isinstance(value, bytes) else value
