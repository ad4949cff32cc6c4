"""Every request runs in the user's causal session.

The signed session cookie (one per region) holds the user and the causal session's token: its
label and the region where that past is visible (causal_client.session_token). A request that
touches the store resumes the session here from the token, and stores the token that comes back,
which has merged in everything the request read and wrote.

Resuming is free when the token says the session ended its last request here: all it covers was
visible here then, and stays visible. A request that had to move to another region (data not
replicated here) stores a migration label back to this region instead (§4.3), so that the next
request waits only for that label. Anything else (a token from another region, a hand-off, a
cookie from an older version) resumes as the client library does: a migration from the token's
region, or an attach that waits until every region has passed the label, so nothing the user saw
disappears.
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import UTC, datetime
from typing import Literal

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from causal_client import (
    CausalError,
    InvalidRequest,
    Label,
    LabelType,
    Session,
    SessionToken,
    StoreFull,
    UnknownRegion,
)
from webapp import notices, tasks
from webapp.context import RegionContext, current
from webapp.label_marks import LabelMarks, later_token
from webapp.social import Social
from webapp.social_values import Account, NoSuchUser

log = logging.getLogger("webapp.causal")

USER_KEY = "user"
LABEL_KEY = "label"  # the causal session's token (a migration label back here after a move)
NOTE_KEY = "label_note"  # where the session's label last came from, for the label panel
FAMILY_KEY = "family"  # one browser session, across the regions it travels to (sign-out ends it)
HOME_KEY = "home"  # the user's home group, once read: the unread count is read with the account
SIGNED_IN_KEY = "signed_in_us"  # when the session signed in (travels with it): an account's
#                                  sessions_from after it signs it out (a password change)


def new_family() -> str:
    return secrets.token_urlsafe(12)


class CausalRequest:
    """The request's view of the store: a session attached on first use, the signed-in user."""

    def __init__(self, request: HttpRequest, ctx: RegionContext):
        self.request = request
        self.ctx = ctx
        self._session: Session | None = None
        self._resumed_from: str | None = None  # the token the session resumed from (no news: no merge)
        self._account: Account | Literal[False] | None = False  # False: not looked up yet
        self._social: Social | None = None
        #: the outbox cells this request wrote, as (region, group, column): nudged after it
        self.queued: list[tuple[str, str, str]] = []
        self._unread: int | None = None
        self._unread_known = False  # whether _unread was read (or set) in this request
        #: False: the request leaves the cookie as it came (a poll racing a sign-in or a sign-out)
        self.keeps_session = True
        self.note: str | None = None

    @property
    def username(self) -> str | None:
        return self.request.session.get(USER_KEY)

    @property
    def family(self) -> str:
        """The browser session's family (made on first use)."""
        family = self.request.session.get(FAMILY_KEY)
        if not family:
            family = self.request.session[FAMILY_KEY] = new_family()
        return family

    @property
    def marks(self) -> LabelMarks:
        return LabelMarks.for_broker(self.ctx.topology.broker_url(self.ctx.region))

    @property
    def stored_token(self) -> str:
        """The cookie's token, or this region's mark for the session if that is greater (another
        tab went further)."""
        token = self.request.session.get(LABEL_KEY) or ""
        family = self.request.session.get(FAMILY_KEY)
        return (later_token(self.marks.get(family), token) or "") if family else token

    @property
    def stored_label(self) -> Label:
        try:
            return SessionToken.parse(self.stored_token).label
        except CausalError:
            return Label.zero()

    @property
    def current_token(self) -> str:
        """The session's token: the live session's if the request has one, else the stored one."""
        return self._session.token if self._session is not None else self.stored_token

    @property
    def session(self) -> Session:
        if self._session is None:
            try:
                self._resumed_from = self.stored_token
                self._session = self.ctx.client.session(self.ctx.region, label=self._resumed_from or None)
            except (InvalidRequest, UnknownRegion):  # a token this topology does not know
                log.warning("dropping an unusable label from %s's session", self.username or "a visitor")
                self._session = self.ctx.client.session(self.ctx.region)
        return self._session

    @property
    def social(self) -> Social:
        """The request's operations on the store (one, while the session stays the same)."""
        session = self.session
        if self._social is None or self._social.session is not session:
            self._social = Social(self.ctx, session, self.queued)
        return self._social

    def resume(self, label: Label | str) -> None:
        """Resumes the session here from ``label`` (a hand-off's), waiting until its past is
        visible here; replaces whatever this request had."""
        self._session = self.ctx.client.session(self.ctx.region, label=label)

    @property
    def account(self) -> Account | None:
        """The signed-in user's account (None: signed out, signed out elsewhere, or the account
        is not here). A session signed out at any region is forgotten here too."""
        if self._account is False:
            self._account = None
            if self.username:
                try:
                    found = self.read_account(self.username)
                except NoSuchUser:
                    found = None
                if found is not None and (found.ended or found.sessions_from > self.signed_in_us):
                    log.info("a session of %s that was signed out: forgotten", self.username)
                    self.sign_out()
                    found = None
                self._account = found
        return self._account if isinstance(self._account, Account) else None

    def read_account(self, username: str) -> Account:
        """The account, whether this browser session was signed out, and (when the cookie knows
        the user's home group and it is replicated here) the unread count: one read."""
        home = self.request.session.get(HOME_KEY)
        also = notices.unread_specs(username, home) if home and self.ctx.replicates(home) else []
        found, rows = self.social.account_reading(username, self.family, also)
        if also:
            self.unread_count = notices.unread_of(rows)
        if found.home_group != home and self.keeps_session:
            self.request.session[HOME_KEY] = found.home_group
        return found

    @property
    def unread_count(self) -> int | None:
        """How many notices the signed-in user has not seen (up to notices.UNREAD_CAP + 1),
        once the page looked the account up; None: nobody signed in, or the user's home group
        is not replicated here (the count is read where it lives, never by moving)."""
        if not self._unread_known:
            self.unread_count = None
            me = self._account if isinstance(self._account, Account) else None
            if me is not None and self.ctx.replicates(me.home_group, self.session.region):
                try:
                    rows = self.session.multi_read(notices.unread_specs(me.username, me.home_group))
                    self.unread_count = notices.unread_of(rows)
                except CausalError as exc:  # a count is not worth failing the page
                    log.warning("no unread count for %s: %s", me.username, exc)
        return self._unread

    @unread_count.setter
    def unread_count(self, value: int | None) -> None:
        self._unread, self._unread_known = value, True

    @property
    def known_username(self) -> str | None:
        """The signed-in user's name as far as this request checked it (the account, once read;
        else the cookie's claim)."""
        if self._account is False:
            return self.username
        return self._account.username if isinstance(self._account, Account) else None

    def remember(self, note: str | None = None) -> None:
        """Keeps the session's token in the cookie (after the request, or now). A session that
        moved to another region during the request leaves a migration label back to this one."""
        if not self.keeps_session:
            return
        if self._session is not None:
            token = self._session.token
            if self._session.region != self.ctx.region:  # the fast way back (§4.3)
                try:
                    token = self._session.prepare_migration(self.ctx.region).to_token()
                    note = note or f"a request that moved to {self._session.region} (migration label back)"
                except CausalError as exc:  # the next request resumes from the token: see session
                    log.warning("no migration label back from %s: %s", self._session.region, exc)
            family = self.request.session.get(FAMILY_KEY)  # signed-in sessions have one
            if family and token != self._resumed_from:  # news: merged with what other tabs stored
                token = self.marks.merge(family, token)
            stored = self.request.session
            if token != stored.get(LABEL_KEY):
                stored[LABEL_KEY] = token
                stored[NOTE_KEY] = note or self.note or f"a request at {self.ctx.region}"
        if note:
            self.request.session[NOTE_KEY] = note

    @property
    def signed_in_us(self) -> int:
        return int(self.request.session.get(SIGNED_IN_KEY) or 0)

    def sign_in(
        self, username: str, note: str | None = None, family: str | None = None, signed_in_us: int = 0
    ) -> None:
        """A fresh session (new cookie) for ``username``, keeping the causal past: a new family,
        or the one a travel hand-off carries (signing out anywhere ends it everywhere), and when
        it signed in (now, or the hand-off's: travelling is no new sign-in)."""
        token = self.current_token
        self.request.session.cycle_key()
        self.request.session[FAMILY_KEY] = family or new_family()
        self.request.session[SIGNED_IN_KEY] = signed_in_us or time.time_ns() // 1000
        self.request.session[USER_KEY] = username
        self.request.session.pop(HOME_KEY, None)
        self.request.session[LABEL_KEY] = token
        self.request.session[NOTE_KEY] = note or f"signed in at {self.ctx.region}"
        self._account = False

    def sign_out(self, everywhere: bool = False) -> bool:
        """Forgets the user; the browser keeps its causal past (what it has seen stays seen).
        ``everywhere`` (the log-out button): the session family is ended in the store, so a copy
        of this cookie, or of the ones it took to other regions, signs nobody in anywhere.
        Signed out here whatever happens; returns False if the other regions could not be told
        (the store did not take the write)."""
        told = True
        if everywhere and self.username:
            try:
                self.social.end_sessions(self.family)
            except CausalError as exc:
                log.warning("could not end the sessions of %s everywhere: %s", self.username, exc)
                told = False
        token = self.current_token
        self.request.session.flush()
        self.request.session[LABEL_KEY] = token
        self.request.session[NOTE_KEY] = f"signed out at {self.ctx.region}"
        self._account = None
        return told


class CausalSessionMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.causal = CausalRequest(request, current())
        response = self.get_response(request)
        request.causal.remember()
        for region, group, column in request.causal.queued:
            tasks.nudge(region, group, column)  # the worker drains it now (its sweeper would soon)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, CausalError) and not isinstance(exception, InvalidRequest):
            log.warning("store unavailable for %s: %s", request.path, exception)
            full = isinstance(exception, StoreFull)  # nothing was written: the user may send it again
            response = render(request, "503.html", {"full": full}, status=503)
            if full:
                response["Retry-After"] = "30"
            return response
        return None


def describe_label(label: Label) -> dict:
    if label.is_zero:
        return {"zero": True}
    kind = "migration" if label.type == LabelType.MIGRATION else "update"
    when = datetime.fromtimestamp(label.ts / 1e6, tz=UTC)
    return {
        "zero": False, "ts": label.ts, "src": label.src, "region": label.region, "kind": kind,
        "target": label.target, "when": when, "token": label.to_token(),
    }  # fmt: skip


def region_context(request: HttpRequest) -> dict:
    """Every page knows its region, the others (to travel to) and the session's label."""
    ctx = current()
    causal: CausalRequest | None = getattr(request, "causal", None)
    label = Label.zero()
    if causal is not None:
        label = causal._session.label if causal._session else causal.stored_label
    return {
        "region": ctx.region,
        "regions": [{"name": r, "url": ctx.web_url(r), "here": r == ctx.region} for r in ctx.regions],
        "protocol": ctx.topology.protocol,
        "label": describe_label(label),
        "label_note": request.session.get(NOTE_KEY) if hasattr(request, "session") else None,
        "signed_in_as": causal.known_username if causal else None,
        "unread": causal.unread_count if causal else None,
        "region_groups": ctx.topology.groups_at(ctx.region),
    }
