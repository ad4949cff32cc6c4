"""A session as a string (cookies, task arguments): its label and the region that holds its past.

A label alone does not say where a session's past is visible. It is the greatest label the session
has seen, made wherever that was: a session that wrote x at c, moved to b and read there a newer y
written at a holds y's label, made at a, yet a may not have x. So a token also names the region
the session was attached to when the token was made. Everything the session saw was visible
there, and a region never hides what it has shown: resuming there needs no attach at all;
anywhere else, the session migrates from there (a fresh migration label, paper §4.3), or, when
that region cannot be reached, attaches by waiting until every origin has passed the label
(Alg. 1).

Form: ``"<region>.<label token>"`` (region names never contain what a label token is made of
after its last dot). A bare label token, without a region, is a hand-off: a migration label made
for the region that resumes it (``Session.prepare_migration``), or any label, which that region
attaches with by waiting for every origin.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from causal_client.errors import InvalidLabel
from causal_client.label import Label

# A region name as topology files allow it (causal_client cannot import services' validation).
_REGION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True, slots=True)
class SessionToken:
    label: Label
    region: str = ""  # where the session's past is known to be visible; "" for a bare label

    def encode(self) -> str:
        token = self.label.to_token()
        return f"{self.region}.{token}" if self.region else token

    def __str__(self) -> str:
        return self.encode()

    @staticmethod
    def parse(value: SessionToken | Label | str | None) -> SessionToken:
        """Any form a session can be resumed from; raises :class:`InvalidLabel` for garbage."""
        if value is None:
            return SessionToken(Label.zero())
        if isinstance(value, SessionToken):
            return value
        if isinstance(value, Label):
            return SessionToken(value)
        if not isinstance(value, str):
            raise InvalidLabel(f"not a session token: {type(value).__name__}")
        region, dot, label = value.rpartition(".")
        if not dot:
            return SessionToken(Label.from_token(value))
        if not _REGION.fullmatch(region):
            raise InvalidLabel(f"not a session token: {value[:40]!r}")
        return SessionToken(Label.from_token(label), region)
