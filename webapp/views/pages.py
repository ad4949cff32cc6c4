"""Timelines, user pages, tweets, posting, following, finding people."""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode, urlsplit

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.backends.utils import csrf_input
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from webapp import blocks, notices, pins
from webapp.forms import CURSOR, FindForm, PostForm, valid_cursor
from webapp.social_core import USERNAME_PATTERN
from webapp.social_values import Account, BlockedApart, Entry, NoSuchUser, Page, TweetDeleted
from webapp.views import errors
from webapp.views.account import next_url
from webapp.views.errors import ShownBadRequest


def signed_in(view):
    """Views that need a user: the login page otherwise (then back)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.causal.account is None:
            if request.causal.username:  # signed in, but the account is not visible here (yet)
                request.causal.sign_out()
            return redirect(f"{reverse('login')}?{urlencode({'next': back_to(request)})}")
        return view(request, *args, **kwargs)

    return wrapper


def back_to(request: HttpRequest) -> str:
    """Where to return after logging in: this page, or for a form post (a POST-only URL) the page
    the form was on, when it is on this site."""
    if request.method == "GET":
        return request.get_full_path()
    referer = urlsplit(request.META.get("HTTP_REFERER", ""))
    if referer.netloc == request.get_host() and referer.path:
        return referer.path + (f"?{referer.query}" if referer.query else "")
    return reverse("home")


def cursor(request: HttpRequest) -> str | None:
    try:
        return valid_cursor(request.GET.get("after"))
    except ValueError as exc:
        raise ShownBadRequest(str(exc)) from None


def account_or_404(request: HttpRequest, username: str, deleted_ok: bool = False) -> Account:
    """The account a URL names; a 404 for none (and, unless ``deleted_ok``, for a deleted one)."""
    username = username.lower()
    if not USERNAME_PATTERN.match(username):
        raise Http404("no such user")
    try:
        found = request.causal.social.account(username)
    except NoSuchUser:
        raise Http404("no such user") from None
    if found.deleted_us and not deleted_ok:
        raise Http404("no such user")
    return found


def entry_context(request: HttpRequest, entries: list[Entry], reactions: dict | None = None) -> dict:
    """What each entry's template needs: likes and reposts as the reader sees them (read now
    unless given), the page's path (forms come back to it) and one CSRF field for all its forms."""
    if reactions is None:
        reactions = request.causal.social.react_to(entries, request.causal.account)
    return {
        "reactions": reactions,
        "here": request.get_full_path() if request.method == "GET" else reverse("home"),
        "csrf_input": csrf_input(request),
    }


def line_context(request: HttpRequest, page: Page) -> dict:
    """What a line's template needs: its entries, the originals they reply to, their reactions
    (read with the page, or now)."""
    context = entry_context(request, page.entries, page.reactions)
    return {
        **context,
        "page": page,
        "entries": page.entries,
        "originals": page.originals,
        "gone": page.gone,
        "next_cursor": page.next_cursor,
        "authors": page.authors,
    }


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: the home timeline and the post box. Otherwise the public line."""
    me = request.causal.account
    if me is None:
        return public(request)
    social = request.causal.social
    page = social.timeline(me, after=cursor(request))
    context = {"me": me, "form": PostForm(), **line_context(request, page)}
    if not page.entries and page.next_cursor is None and not request.GET.get("after"):
        context |= {"suggested": social.suggestions(me), "following": set()}  # an empty home: who to follow
    return render(request, "home.html", context)


@require_GET
def public(request: HttpRequest) -> HttpResponse:
    page = request.causal.social.public(after=cursor(request), me=request.causal.account)
    return render(request, "public.html", {"me": request.causal.account, **line_context(request, page)})


@require_GET
def user_page(request: HttpRequest, username: str) -> HttpResponse:
    if username != username.lower() and USERNAME_PATTERN.match(username.lower()):  # /u/Alice/ is @alice
        return redirect("user", username=username.lower())
    user = account_or_404(request, username, deleted_ok=True)
    if user.deleted_us:
        return errors.page(request, 410, "Deleted", f"@{user.username} deleted their account.")
    me = request.causal.account
    profile = request.causal.social.profile(user, me, after=cursor(request))
    context = {"me": me, "user": profile.user, "is_following": profile.is_following, "form": PostForm()}
    context |= {"blocks_you": profile.user.username in profile.hidden.blocked_by,
                "you_block": profile.user.username in profile.hidden.blocks,
                "you_mute": profile.user.username in profile.hidden.mutes}  # fmt: skip
    context |= line_context(request, profile.page)
    context["pinned"] = profile.pinned
    context["reactions"] |= request.causal.social.react_to(profile.pinned, me)
    return render(request, "user.html", context)


@require_GET
def relations(request: HttpRequest, username: str, which: str) -> HttpResponse:
    user = account_or_404(request, username)
    social = request.causal.social
    names = social.followers(user) if which == "followers" else social.following(user)
    return render(request, "people_list.html", {
        "me": request.causal.account, "user": user, "which": which, "names": sorted(names),
    })  # fmt: skip


def check_tweet_ref(request: HttpRequest, group: str, tweet_id: str) -> None:
    """A 404 for a URL that cannot name a tweet: a group the topology lacks, a malformed id."""
    if group not in request.causal.ctx.topology.group_members or not CURSOR.match(tweet_id):
        raise Http404("no such tweet")


def tweet_or_404(request: HttpRequest, group: str, tweet_id: str) -> Entry:
    """The tweet a URL names, or a 404 (a malformed reference, no tweet)."""
    check_tweet_ref(request, group, tweet_id)
    entry = request.causal.social.tweet(group, tweet_id)
    if entry is None:
        raise Http404("no such tweet")
    return entry


@require_GET
def tweet_page(request: HttpRequest, group: str, tweet_id: str) -> HttpResponse:
    """A tweet's conversation: what it replies to, up the chain, the tweet, and its replies,
    oldest first (``?after=`` pages through them)."""
    check_tweet_ref(request, group, tweet_id)
    social, me = request.causal.social, request.causal.account
    try:
        talk = social.conversation(group, tweet_id, after=cursor(request), me=me)
    except TweetDeleted:
        return errors.page(request, 410, "Deleted", "This tweet was deleted by its author.")
    except BlockedApart as apart:
        why = f"@{apart.author} blocks you" if apart.blocks_you else f"You block @{apart.author}"
        return errors.page(request, 403, "Not available", f"{why}: this tweet is not shown to you.")
    if talk is None:
        raise Http404("no such tweet")
    entry = talk.tweet
    chain = [*talk.ancestors, entry]
    originals: dict[str, Entry | None] = {e.id: e for e in chain}
    first = social.lookups(chain[:1])  # what the first one answers, if it is shown at all
    originals |= first.originals
    gone = first.gone
    mine = me is not None and me.username == entry.author
    # the reply names whom it answers: the tweet's author, then the thread's other participants
    # up the chain; never oneself (a reply to one's own tweet names the others, or nobody)
    me_name = me.username if me is not None else ""
    named = dict.fromkeys(e.author for e in (entry, *reversed(talk.ancestors)) if e.author != me_name)
    addressed = "".join(f"@{name} " for name in list(named)[:3])
    form = PostForm(initial={"reply_to": f"{group}/{tweet_id}", "body": addressed})
    pinned = mine and not entry.reposted_by and any(
        (p.group, p.tweet_id) == (entry.group, entry.tweet_id)
        for p in pins.pinned(request.causal.session, me.username, me.home_group)
    )  # fmt: skip
    return render(request, "tweet.html", {
        "me": me, "entry": entry, "talk": talk, "originals": originals, "form": form, "gone": gone,
        "pinned": pinned, **entry_context(request, [*chain, *talk.replies]),
    })  # fmt: skip


@require_POST
@signed_in
def post(request: HttpRequest) -> HttpResponse:
    me = request.causal.account
    form = PostForm(request.POST)
    if not form.is_valid():
        page = request.causal.social.timeline(me)
        context = {"me": me, "form": form, **line_context(request, page)}
        return render(request, "home.html", context, status=400)
    social = request.causal.social
    reply_to = None
    if form.cleaned_data["reply_to"]:
        group, tweet_id = form.cleaned_data["reply_to"].split("/", 1)
        reply_to = (
            social.tweet(group, tweet_id) if group in request.causal.ctx.topology.group_members else None
        )
        if reply_to is None:
            raise ShownBadRequest("The tweet you reply to does not exist (here).")
    addressed = [*notices.mentioned(form.cleaned_data["body"]), *([reply_to.author] if reply_to else [])]
    refused = blocks.refused_names(social.hidden(me), addressed)
    if refused:
        names = ", ".join(f"@{name}" for name in refused)
        form.add_error("body", f"You cannot reply to or mention {names}: one of you blocks the other.")
        context = {"me": me, "form": form, **line_context(request, social.timeline(me))}
        return render(request, "home.html", context, status=400)
    entry = social.post(me, form.cleaned_data["body"], reply_to)  # outbox cells: nudged (webapp/causal.py)
    request.causal.note = f"your tweet at {request.causal.ctx.region}"
    if reply_to is None:
        messages.success(request, "Posted.")
        return redirect("home")
    messages.success(request, f"Replied to @{reply_to.author}.")
    return redirect(f"{reverse('tweet', args=[reply_to.group, reply_to.id])}#t-{entry.id}")


@require_POST
@signed_in
def follow(request: HttpRequest, username: str, undo: bool = False) -> HttpResponse:
    me = request.causal.account
    user = account_or_404(request, username)
    if user.username == me.username:
        raise ShownBadRequest("You cannot follow yourself.")
    social = request.causal.social
    if undo:
        if social.is_following(me, user.username):
            social.unfollow(me, user)
        messages.info(request, f"You no longer follow @{user.username}.")
    elif user.username in social.hidden(me).apart:
        return errors.page(
            request, 403, "Not allowed", f"You cannot follow @{user.username}: one of you blocks the other."
        )
    else:
        if not social.is_following(me, user.username):
            social.follow(me, user)
        messages.success(request, f"You follow @{user.username}: their new tweets reach your timeline.")
    if request.POST.get("next"):  # a Follow button in a list: back to the list
        return redirect(next_url(request))
    return redirect("user", username=user.username)


@require_GET
def people(request: HttpRequest) -> HttpResponse:
    """People whose name holds the query (the exact one first, with its counts), who to follow
    (for a signed-in user) and the newest people, each with a Follow button."""
    form = FindForm(request.GET or None)
    social, me = request.causal.social, request.causal.account
    found, query, named = None, "", []
    if form.is_bound and form.is_valid() and form.cleaned_data["q"]:
        query = form.cleaned_data["q"]
        named = social.people_named(query)
        if USERNAME_PATTERN.match(query) and query in named:
            found = social.with_relations(social.account(query))
            named = [n for n in named if n != query]
    suggested = social.suggestions(me) if me is not None else []
    return render(request, "people.html", {
        "me": me, "form": form, "query": query, "found": found, "named": named, "suggested": suggested,
        "newest": social.newest_people(), "following": following_of(request),
    })  # fmt: skip


def following_of(request: HttpRequest) -> set[str]:
    """Whom the signed-in user follows (for the Follow buttons of a list of people)."""
    me = request.causal.account
    if me is None or not request.causal.ctx.replicates(me.home_group, request.causal.session.region):
        return set()
    return set(request.causal.social.following(me))
