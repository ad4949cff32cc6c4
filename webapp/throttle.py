"""Login throttling that slows an attacker without handing them a switch to lock a user out:
failed logins are counted per (account, client address) and per client address, never per
account alone, so guesses from one address lock that address out of that account (and, past
ADDRESS_LIMIT, out of every account), while the real user, from any other address, still logs
in. As django-axes and django-ratelimit do (the references), a pair's first FREE_FAILURES
failures cost nothing, every later one doubles the wait before the next try (growing delays, up
to the window), and the limits cap a window.

Why the store and not one of those libraries: the web app has no SQL database (axes keeps its
attempts in one, or in a cache every web process shares), and the store already has what a
throttle needs: counters that merge across regions. The rows live in the accounts group,
replicated everywhere, so guesses spread over several regions add up (each region sees the
others' failures once replicated, a few hundred milliseconds later). A window's count is the sum
of the current window's counter and the previous one's (a sliding window, coarse and
conservative), and a refusal says when the count really drops below the limit. Rows are named by
window (``throttle:<kind>:<key>:<window>``): each is written in its own 15 minutes and read in the
next 15, and never again.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from causal_client import Mutation, ReadSpec, Row
from webapp.causal import CausalRequest

WINDOW_S = 15 * 60
PAIR_LIMIT = 10  # failed logins of one account from one address per window (two windows counted)
ADDRESS_LIMIT = 50  # failed logins from one client address, whatever the accounts
FREE_FAILURES = 3  # a pair's failures before each next one doubles the wait (1 s, 2 s, 4 s...)
COLUMN = "failed"
LAST = "last"  # when the pair's latest failure was (µs), for the growing delay


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after_s: int = 0


KINDS = (("pair", PAIR_LIMIT), ("address", ADDRESS_LIMIT))


def _rows(username: str, address: str, window: int) -> list[str]:
    """The rows counted for ``window``, in the order of KINDS. The address is hashed: the store
    keeps no client address in clear."""
    hashed = hashlib.sha256(address.encode()).hexdigest()[:24]
    return [f"throttle:pair:{username}:{hashed}:{window}", f"throttle:address:{hashed}:{window}"]


def _limits() -> tuple[int, ...]:
    return tuple(limit for _, limit in KINDS)


def wait_s(previous: int, current: int, limit: int, window: int, now: float) -> float:
    """How long until the sliding count (previous window + current) drops below ``limit``: at
    the end of this window if the previous one pushed it over, at the end of the next if this
    one alone does."""
    if previous + current < limit:
        return 0.0
    ends = (window + 1) * WINDOW_S if current < limit else (window + 2) * WINDOW_S
    return ends - now


def delay_s(failures: int, last_us: int, now: float) -> float:
    """The growing delay's remaining wait after a pair's ``failures``-th failure at ``last_us``."""
    if failures < FREE_FAILURES or not last_us:
        return 0.0
    delay = min(2.0 ** (failures - FREE_FAILURES), WINDOW_S)
    return max(0.0, last_us / 1e6 + delay - now)


def check(causal: CausalRequest, username: str, address: str, now: float | None = None) -> Verdict:
    """Whether a login of ``username`` from ``address`` may be tried now, and if not, for how long
    not (one read: both keys, the current window and the previous one)."""
    now = time.time() if now is None else now
    window = int(now // WINDOW_S)
    group = causal.ctx.accounts_group
    names = _rows(username, address, window - 1) + _rows(username, address, window)
    rows = causal.session.multi_read([ReadSpec(group, name, (COLUMN, LAST)) for name in names])
    previous, current = rows[: len(KINDS)], rows[len(KINDS) :]
    waits = [
        wait_s(previous[k].counter(COLUMN), current[k].counter(COLUMN), limit, window, now)
        for k, limit in enumerate(_limits())
    ]
    pair_failures = previous[0].counter(COLUMN) + current[0].counter(COLUMN)
    waits.append(delay_s(pair_failures, max(_last_us(previous[0]), _last_us(current[0])), now))
    longest = max(waits)
    return Verdict(True) if longest <= 0 else Verdict(False, int(longest) + 1)


def _last_us(row: Row) -> int:
    text = row.text(LAST)
    return int(text) if text and text.isdigit() else 0


def failed(
    causal: CausalRequest, username: str, address: str, now: float | None = None, known: bool = True
) -> None:
    """Counts a failed login for the address and, when the account exists here (``known``), for
    the pair, noting when (one batch). A name not (yet) known here costs the address only: a
    sign-in tried while a new account is still on its way is no guess at a password."""
    now = time.time() if now is None else now
    group = causal.ctx.accounts_group
    pair, by_address = _rows(username, address, int(now // WINDOW_S))
    counted = [Mutation(group, by_address).increment(COLUMN)]
    if known:
        counted.append(Mutation(group, pair).increment(COLUMN).update({LAST: str(int(now * 1e6))}))
    causal.session.batch(counted, atomic=False)
