"""Search (tweets by words and hashtags, people by any part of their name), hashtag pages and
who to follow (webapp/search.py, ``Social.suggestions``)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from webapp import search
from webapp.forms import SearchForm
from webapp.views.pages import cursor, following_of, line_context


@require_GET
def search_page(request: HttpRequest) -> HttpResponse:
    """``?q=``: the people whose name holds it and the tweets with all of its words and tags,
    newest first, paginated. A lone ``#tag`` is its tag page."""
    form = SearchForm(request.GET or None)
    query_text = form.cleaned_data["q"] if form.is_valid() else ""
    query = search.Query.parse(query_text)
    if query.tags and not query.words and query_text.strip() == f"#{query.tags[0]}":
        return redirect("tag", tag=query.tags[0])
    social, me = request.causal.social, request.causal.account
    context = {"me": me, "form": form, "query": query_text, "people": [], "searched": bool(query_text),
               "following": following_of(request)}  # fmt: skip
    if query_text:
        context["people"] = social.people_named(query_text.split()[0])
    if not query.empty:
        page = social.search(query, after=cursor(request), me=me)
        context |= line_context(request, page)
        context["keep_query"] = urlencode({"q": query_text}) + "&"
    status = 400 if form.is_bound and not form.is_valid() else 200
    return render(request, "search.html", context, status=status)


@require_GET
def tag_page(request: HttpRequest, tag: str) -> HttpResponse:
    """A hashtag's tweets, newest first, like a timeline (causal: webapp/search.py)."""
    tags = search.tags_of(f"#{tag}")
    if not tags or tags[0] != tag.lower():
        raise Http404("not a hashtag")
    if tag != tags[0]:
        return redirect("tag", tag=tags[0])
    me = request.causal.account
    page = request.causal.social.tag_line(tag, after=cursor(request), me=me)
    return render(request, "tag.html", {"me": me, "tag": tag, **line_context(request, page)})
