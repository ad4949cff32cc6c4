"""Travel to another region's web app, taking the session along (webapp/handoff.py says how)."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from webapp import handoff
from webapp.views.errors import ShownBadRequest, page

log = logging.getLogger("webapp.travel")


@require_POST
def travel(request: HttpRequest) -> HttpResponse:
    """A page whose form carries the hand-off to the destination (the browser submits it at
    once; without scripts, its button does). Never cached; the destination learns only which
    origin sent it."""
    ctx = request.causal.ctx
    destination = request.POST.get("region", "")
    if destination not in ctx.regions:
        raise ShownBadRequest(f"Unknown region {destination[:40]!r}.")
    if destination == ctx.region:
        return redirect("home")
    departure = handoff.leave(request.causal, destination)
    reply = render(request, "depart.html", {"destination": destination, "departure": departure})
    add_never_cache_headers(reply)
    reply["Referrer-Policy"] = "origin"  # the arrival checks the Origin; no path is ever sent
    return reply


@csrf_exempt  # another region's page posts it: Origin checked; the hand-off signed, fresh, single use, bound
@require_POST
def arrive(request: HttpRequest) -> HttpResponse:
    """The arrival: checks the hand-off, attaches with its migration label, signs the user in."""
    region = request.causal.ctx.region
    try:
        arrived = handoff.arrive(request.causal, request.POST.get("t", ""))
    except handoff.BadHandoff as exc:
        return page(request, 400, "Cannot travel with this hand-off", str(exc))
    except handoff.HandoffUnavailable as exc:
        log.warning("travel to %s unavailable: %s", region, exc)
        return page(
            request, 503, "Travel is unavailable", "Travel is unavailable here right now. Try again soon."
        )
    messages.info(request, f"You travelled from {arrived.origin} to {region}.")
    return redirect("home")
