"""Login throttling: failed logins counted in the causal store, per account and per client
address, in windows of ``WINDOW_S``.

Why the store and not a library such as django-axes: the web app has no SQL database (axes keeps
its attempts in one, or in a cache every web process shares), and the store already has what a
throttle needs: counters that merge across regions. The rows live in the accounts group,
replicated everywhere, so guesses spread over several regions add up (each region sees the
others' failures once replicated, a few hundred milliseconds later). A window's count is the sum
of the current window's counter and the previous one's (a sliding window, coarse and
conservative). Rows are named by window (``throttle:<kind>:<key>:<window>``): each is written in
its own 15 minutes and read in the next 15, and never again.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from causal_client import Mutation, ReadSpec
from webapp.causal import CausalRequest

WINDOW_S = 15 * 60
ACCOUNT_LIMIT = 10  # failed logins of one account per window (two windows counted)
ADDRESS_LIMIT = 50  # failed logins from one client address, whatever the accounts
COLUMN = "failed"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after_s: int = 0


KINDS = (("account", ACCOUNT_LIMIT), ("address", ADDRESS_LIMIT))


def _rows(username: str, address: str, window: int) -> list[str]:
    """The rows counted for ``window``, in the order of KINDS. The address is hashed: the store
    keeps no client address in clear."""
    hashed = hashlib.sha256(address.encode()).hexdigest()[:24]
    return [f"throttle:account:{username}:{window}", f"throttle:address:{hashed}:{window}"]


def check(causal: CausalRequest, username: str, address: str, now: float | None = None) -> Verdict:
    """Whether a login of ``username`` from ``address`` may be tried now (one read: both keys,
    the current window and the previous one)."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    group = causal.ctx.accounts_group
    names = _rows(username, address, window - 1) + _rows(username, address, window)
    rows = causal.session.multi_read([ReadSpec(group, name, (COLUMN,)) for name in names])
    for k, (_, limit) in enumerate(KINDS):
        if rows[k].counter(COLUMN) + rows[k + len(KINDS)].counter(COLUMN) >= limit:
            return Verdict(False, int((window + 1) * WINDOW_S - now) + 1)
    return Verdict(True)


def failed(causal: CausalRequest, username: str, address: str, now: float | None = None) -> None:
    """Counts a failed login for the account and the address (one batch)."""
    now = time.time() if now is None else now
    group = causal.ctx.accounts_group
    rows = _rows(username, address, int(now // WINDOW_S))
    causal.session.batch([Mutation(group, row).increment(COLUMN) for row in rows], atomic=False)
