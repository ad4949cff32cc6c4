"""Accounts: a username is unique across all regions. Sign-up is an insert-if-absent on the
name's strongly consistent register (replicated at every region, decided by any majority:
causal_client/strong.py), then the account row, replicated everywhere, which carries the claim's
token: a user can sign in at any region, and sign-up works with any minority of regions down.

An unknown outcome never frees a name. The token for a name is kept in the browser's session
until its sign-up succeeds, so a retry from there presents the same token and is recognised as
the holder (the insert is idempotent), whether the first attempt's claim or account write landed
or not. Names are never given back: there is nothing to release that a later sign-up could take
over. Accounts made before the registers existed (their claim was a compare-and-set at an owner
region) carry over: a name whose account row exists without this token is taken.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.hashers import check_password, make_password

from causal_client import Conflict, InsertIfAbsent, Session, execute_settled
from webapp.causal import CausalRequest
from webapp.social_values import Account, NoSuchUser

USERNAMES = "username"  # the strong registers' namespace of usernames
PENDING_KEY = "signup_tokens"  # in the browser's session: name → the token its sign-up presents
CLAIM_TRIES = 3


class UsernameTaken(Exception):
    """Someone, in some region, has the name (or claimed it a moment before)."""


def register(causal: CausalRequest, username: str, password: str) -> Account:
    """Claims the name on its register, then writes the account (module doc)."""
    pending = causal.request.session.setdefault(PENDING_KEY, {})
    holder = pending.setdefault(username, secrets.token_hex(12))
    causal.request.session.modified = True  # saved before anything is claimed with it
    if claim_name(causal.session, username, holder) != holder:
        raise UsernameTaken(username)
    try:
        existing = causal.social.account(username)
    except NoSuchUser:
        existing = None
    if existing is not None and existing.claim != holder:  # an account from before the registers
        raise UsernameTaken(username)
    account = causal.social.create_account(username, make_password(password), causal.ctx.home_group(), holder)
    pending.pop(username, None)
    causal.request.session.modified = True
    causal.sign_in(username, note=f"signed up at {causal.ctx.region}")
    return account


def claim_name(session: Session, username: str, holder: str) -> str | None:
    """Who holds the name after an insert-if-absent of ``holder``: its holder's token. A cut
    short insert is settled by sending it again (``causal_client.execute_settled``)."""
    for _ in range(CLAIM_TRIES - 1):
        try:
            return execute_settled(session, USERNAMES, username, InsertIfAbsent(holder)).value
        except Conflict:
            continue  # concurrent sign-ups for the name: one of them wins, try again to see which
    return execute_settled(session, USERNAMES, username, InsertIfAbsent(holder)).value


@dataclass(frozen=True)
class LoginCheck:
    account: Account | None  # the account, when the password is right
    known: bool  # whether the name is an account visible here (the throttle counts a pair's
    # failures only for one)


def authenticate(causal: CausalRequest, username: str, password: str) -> LoginCheck:
    """The password checked against the account, with one read of it either way."""
    try:
        account = causal.social.account(username)
    except NoSuchUser:
        make_password(password)  # the same work either way: no timing hint that the name is free
        return LoginCheck(None, known=False)
    return LoginCheck(account if check_password(password, account.password_hash) else None, known=True)
