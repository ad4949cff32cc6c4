"""Accounts: a username is unique across all regions (a strongly consistent claim at the name's
owner region, then the account, replicated everywhere, so a user can sign in at any region)."""

from __future__ import annotations

import secrets

from django.contrib.auth.hashers import check_password, make_password

from causal_client import CausalError
from webapp.causal import CausalRequest
from webapp.social import Account, NoSuchUser

CLAIM_NAMESPACE = "username"


class UsernameTaken(Exception):
    """Someone, in some region, has the name (or claimed it a moment before)."""


def register(causal: CausalRequest, username: str, password: str) -> Account:
    """Claims the name, then writes the account; gives the name back if the write fails."""
    session = causal.session
    holder = secrets.token_hex(12)
    if not session.claim(CLAIM_NAMESPACE, username, holder).granted:
        raise UsernameTaken(username)
    try:
        account = causal.social.create_account(username, make_password(password), causal.ctx.home_group())
    except CausalError:
        session.release_claim(CLAIM_NAMESPACE, username, holder)
        raise
    causal.sign_in(username, note=f"signed up at {causal.ctx.region}")
    return account


def authenticate(causal: CausalRequest, username: str, password: str) -> Account | None:
    try:
        account = causal.social.account(username)
    except NoSuchUser:
        make_password(password)  # the same work either way: no timing hint that the name is free
        return None
    return account if check_password(password, account.password_hash) else None
