"""One social-network user doing the mix's operations, against the store or against the web app.

An actor is one user of the graph with its own causal session and home region (the placement's).
It knows nothing of Locust: it reports each operation to a ``record`` callback, which the
locustfile turns into Locust request events, and the tests call directly.

- :class:`StoreActor` runs the app's own operations (webapp/social.py) through ``causal_client``,
  as the web app's request would, minus the HTTP and the Celery fan-out (the web tier's work).
  Operations on data not replicated where the session is migrate it there; before each operation
  the actor goes back home if it wandered (its client lives near its home region). Migrations are
  reported as their own kind, ``migrate``, named ``origin→target``.
- :class:`WebActor` logs in to the web app of its home region and requests its pages; the web app
  migrates its causal session when a page needs remote data (the services' metrics see those).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable
from typing import Any

import requests

from causal_client import CausalError, tls
from loadtest.workload.mix import Action, Mix, Op, draw
from loadtest.workload.plan import Plan
from loadtest.workload.population import BODIES, PASSWORD, username
from webapp.context import RegionContext
from webapp.search import Query
from webapp.social import Social

Recorder = Callable[[str, str, float, BaseException | None], None]
"""(kind, name, seconds, error or None): one finished request."""

STORE, WEB, MIGRATE = "store", "http", "migrate"


class ActorError(RuntimeError):
    """An operation did not do what it should (a page without the expected content, a 5xx)."""


class Actor:
    """What both targets share: the user, their friends, the mix, and timing each operation."""

    kind = STORE

    def __init__(self, plan: Plan, user: int, mix: Mix, record: Recorder, rng: random.Random):
        self.plan = plan
        self.user = user
        self.name = username(user)
        self.home = plan.placement.home[user]
        self.friends = list(plan.graph.friends[user])
        self.following = {username(f) for f in self.friends}  # seeded as mutual follows
        self.mix = mix
        self.record = record
        self.rng = rng

    def step(self) -> Action:
        """Draws the next operation and does it."""
        action = draw(self.mix, self.rng, self.user, self.friends, self.plan.graph.users)
        self.perform(action)
        return action

    def perform(self, action: Action) -> None:
        self.before(action)
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            self.do(action)
        except Exception as exc:  # every failure is a failed request in the figures, never lost
            error = exc
        self.record(self.kind, str(action.op), time.perf_counter() - started, error)

    def before(self, action: Action) -> None:
        """Hook run before an operation is timed."""

    def do(self, action: Action) -> None:
        raise NotImplementedError

    def body(self) -> str:
        return self.rng.choice(BODIES)

    def search_words(self) -> str:
        """Two words of the tweets the population posts (webapp/search.py finds both)."""
        words = [w.strip(".,!?") for w in self.rng.choice(BODIES).split() if len(w.strip(".,!?")) > 4]
        return " ".join(self.rng.sample(words, min(2, len(words))))

    def profile(self) -> dict[str, str]:
        return {"display": self.name.replace("_", " ").title(), "bio": self.rng.choice(BODIES)}

    def toggle_follow(self, target: str) -> bool:
        """Follows ``target`` if not following them, else unfollows; returns True for a follow."""
        following = target in self.following
        if following:
            self.following.discard(target)
        else:
            self.following.add(target)
        return not following


class StoreActor(Actor):
    kind = STORE

    def __init__(
        self,
        plan: Plan,
        user: int,
        mix: Mix,
        record: Recorder,
        rng: random.Random,
        context: Callable[[str], RegionContext],
    ):
        super().__init__(plan, user, mix, record, rng)
        ctx = context(self.home)
        self.session = ctx.client.session(self.home, on_migrate=self._migrated)
        self.social = Social(ctx, self.session)
        self.me = self.social.account(self.name)

    def _migrated(self, origin: str, target: str, seconds: float) -> None:
        self.record(MIGRATE, f"{origin}→{target}", seconds, None)

    def before(self, action: Action) -> None:
        if self.session.region != self.home:
            try:
                self.session.migrate(self.home)
            except CausalError as exc:
                self.record(MIGRATE, f"{self.session.region}→{self.home}", 0.0, exc)

    def do(self, action: Action) -> None:
        social = self.social
        match action.op:
            case Op.HOME:
                social.timeline(self.me)
            case Op.PUBLIC:
                social.public()
            case Op.USER_PAGE:
                social.userline(social.account(target_name(action)))
            case Op.POST:
                social.post(self.me, self.body())
            case Op.REPLY:
                page = social.userline(social.account(target_name(action)))
                original = page.entries[0] if page.entries else None
                social.post(self.me, self.body(), original)
            case Op.FOLLOW:
                other = social.account(target_name(action))
                if self.toggle_follow(other.username):
                    social.follow(self.me, other)
                else:
                    social.unfollow(self.me, other)
            case Op.SEARCH:
                social.search(Query.parse(self.search_words()), me=self.me)
            case Op.PROFILE:
                fields = self.profile()
                social.update_profile(self.me, fields["display"], fields["bio"])
            case Op.BLOCK:
                other = social.account(target_name(action))
                social.block(self.me, other)
                social.block(self.me, other, undo=True)
                self.following.discard(other.username)


TWEET_LINK = re.compile(r'href="/t/([A-Za-z0-9_.-]+)/([0-9a-f]+)/"')


class WebActor(Actor):
    """Requests pages of the web app of the user's home region; every HTTP request is reported
    on its own (a reply is the friend's page, then the post)."""

    kind = WEB

    def __init__(
        self, plan: Plan, user: int, mix: Mix, record: Recorder, rng: random.Random, timeout: float = 30.0
    ):
        super().__init__(plan, user, mix, record, rng)
        self.base_url = plan.topology.web_url(self.home).rstrip("/")
        self.http = requests.Session()
        if (files := tls.from_env()) is not None:  # https: the deployment's CA, not the system's
            self.http.verify = str(files.ca)
        self.timeout = timeout
        self.page("GET", "/login/", "log in (form)")
        self.page("POST", "/login/", "log in", data={"username": self.name, "password": PASSWORD}, expect=302)

    @property
    def csrf(self) -> str:
        """Django's CSRF secret from this region's cookie (the form accepts it unmasked); log-in
        rotates it, so it is read afresh."""
        for cookie in self.http.cookies:
            if cookie.name.startswith("csrftoken"):
                return cookie.value or ""
        return ""

    def page(self, method: str, path: str, name: str, expect: int = 200, **kwargs: Any) -> requests.Response:
        """One request, reported; a status other than ``expect`` is a failure (ActorError)."""
        if method == "POST":
            kwargs.setdefault("data", {})["csrfmiddlewaretoken"] = self.csrf
            kwargs["headers"] = {"Referer": self.base_url + path}
        started = time.perf_counter()
        error: BaseException | None = None
        response = None
        try:
            response = self.http.request(
                method, self.base_url + path, allow_redirects=False, timeout=self.timeout, **kwargs
            )
            if response.status_code != expect:
                error = ActorError(f"{method} {path}: HTTP {response.status_code} {response.text[:200]!r}")
        except requests.RequestException as exc:
            error = exc
        self.record(self.kind, name, time.perf_counter() - started, error)
        if error is not None or response is None:
            raise ActorError(str(error))
        return response

    def perform(self, action: Action) -> None:
        started = time.perf_counter()
        try:
            self.do(action)
        except ActorError:
            pass  # page() has reported it
        except Exception as exc:  # a bug of ours, not the app's: still a failed request
            self.record(self.kind, str(action.op), time.perf_counter() - started, exc)

    def do(self, action: Action) -> None:
        match action.op:
            case Op.HOME:
                self.page("GET", "/", str(Op.HOME))
            case Op.PUBLIC:
                self.page("GET", "/public/", str(Op.PUBLIC))
            case Op.USER_PAGE:
                self.page("GET", f"/u/{target_name(action)}/", str(Op.USER_PAGE))
            case Op.POST:
                self.page("POST", "/post/", str(Op.POST), expect=302, data={"body": self.body()})
            case Op.REPLY:
                html = self.page("GET", f"/u/{target_name(action)}/", "reply: the friend's page").text
                found = TWEET_LINK.search(html)
                data = {"body": self.body()}
                if found:
                    data["reply_to"] = f"{found.group(1)}/{found.group(2)}"
                self.page("POST", "/post/", str(Op.REPLY), expect=302, data=data)
            case Op.FOLLOW:
                target = target_name(action)
                verb = "follow" if self.toggle_follow(target) else "unfollow"
                self.page("POST", f"/u/{target}/{verb}/", str(Op.FOLLOW), expect=302)
            case Op.SEARCH:
                self.page("GET", "/search/", str(Op.SEARCH), params={"q": self.search_words()})
            case Op.PROFILE:
                self.page("POST", "/settings/profile/", str(Op.PROFILE), expect=302, data=self.profile())
            case Op.BLOCK:
                target = target_name(action)
                self.page("POST", f"/u/{target}/block/", "block", expect=302)
                self.page("POST", f"/u/{target}/unblock/", "unblock", expect=302)
                self.following.discard(target)  # a block takes the follows away both ways


def target_name(action: Action) -> str:
    """The user an action on someone is on (the mix gives every such action a target)."""
    assert action.target is not None, f"{action.op} has no target"
    return username(action.target)
