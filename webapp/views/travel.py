"""Travel to another region's web app, taking the session along."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from webapp import travel as handoff
from webapp.views.errors import ShownBadRequest, page

log = logging.getLogger("webapp.travel")


@require_POST
def travel(request: HttpRequest) -> HttpResponse:
    ctx = request.causal.ctx
    destination = request.POST.get("region", "")
    if destination not in ctx.regions:
        raise ShownBadRequest(f"Unknown region {destination[:40]!r}.")
    if destination == ctx.region:
        return redirect("home")
    return redirect(handoff.leave(request.causal, destination))


@require_http_methods(["GET", "POST"])
def arrive(request: HttpRequest) -> HttpResponse:
    """GET: who is arriving, and a button; POST (CSRF-checked): the arrival itself."""
    region = request.causal.ctx.region
    token = (request.POST if request.method == "POST" else request.GET).get("t", "")
    try:
        if request.method == "GET":
            found = handoff.check(request.causal, token)  # checked now, used only by the POST
            return render(request, "arrive.html", {"handoff": found, "token": token})
        arrived = handoff.arrive(request.causal, token)
    except handoff.BadHandoff as exc:
        return page(request, 400, "Cannot travel with this link", str(exc))
    except handoff.HandoffUnavailable as exc:
        log.warning("travel to %s unavailable: %s", region, exc)
        return page(
            request,
            503,
            "Travel is unavailable",
            "Travel is unavailable here right now. Try again in a moment.",
        )
    messages.info(request, f"You travelled from {arrived.origin} to {region}.")
    return redirect("home")
