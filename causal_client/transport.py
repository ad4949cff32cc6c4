"""How a session's calls reach a region: the interface both ways implement.

- :class:`causal_client.direct.DirectTransport` calls the gears inside the region's stores
  (Redis Functions, over redis-py): the fast path, no process in between.
- :class:`causal_client.gateway.GatewayTransport` calls the region's gRPC frontend, which makes
  the same gear calls: for clients that cannot reach the stores.

Both take and return the library's own values; a session keeps its label (it sends it on every
call and merges what comes back) and emulates the WAN around each call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from causal_client.data import Mutation, ReadSpec
from causal_client.errors import InvalidRequest
from causal_client.label import Label
from causal_client.transactions import ReadResult


class Transport(ABC):
    @abstractmethod
    def read(self, region: str, label: Label, specs: Sequence[ReadSpec], floor: int = 0) -> ReadResult:
        """The rows, in order, as one snapshot at or after ``floor`` (a read-only transaction),
        the greatest label among them and the snapshot's time."""

    @abstractmethod
    def write(self, region: str, label: Label, mutations: Sequence[Mutation], atomic: bool = True) -> Label:
        """Applies the mutations, all or none visible (``atomic``: one label; else each row its
        own); returns the greatest label made."""

    @abstractmethod
    def migrate(self, region: str, label: Label, target: str) -> Label:
        """A migration label made at ``region`` for ``target`` (paper Alg. 2)."""

    @abstractmethod
    def attach(self, region: str, label: Label, timeout: float) -> None:
        """Returns once ``label``'s past is visible at ``region`` (paper Alg. 1); raises
        StoreTimeout after ``timeout`` seconds."""

    @abstractmethod
    def claim(self, region: str, namespace: str, key: str, holder: str, release: bool) -> tuple[bool, str]:
        """A claim (or its release) at the key's owner region: granted, and the holder after it."""

    def register_call(
        self, region: str, namespace: str, key: str, function: str, args: list, meta: bool
    ) -> list:
        """One phase of a strong operation at a register's replica in ``region`` (its shard there
        is the register's); ``meta``: in the critical class of a prioritising link."""
        raise self._no_strong()

    def red_call(self, region: str, function: str, args: list, meta: bool) -> list:
        """One call of a token-ordered red operation at ``region``'s first shard, where its token
        and red registers are (causal_client/token.py)."""
        raise self._no_strong()

    def _no_strong(self) -> InvalidRequest:
        return InvalidRequest(
            f"{type(self).__name__} cannot run strong operations: they need the stores themselves "
            "(a client made without gateway=True)"
        )

    @abstractmethod
    def close(self) -> None: ...
