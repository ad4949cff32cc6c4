"""Travel to another region's web app, taking the session along."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import BadRequest
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from webapp import travel as handoff
from webapp.views.errors import page


@require_POST
def travel(request: HttpRequest) -> HttpResponse:
    ctx = request.causal.ctx
    destination = request.POST.get("region", "")
    if destination not in ctx.regions:
        raise BadRequest(f"Unknown region {destination[:40]!r}.")
    if destination == ctx.region:
        return redirect("home")
    return redirect(handoff.leave(request.causal, destination))


@require_GET
def arrive(request: HttpRequest) -> HttpResponse:
    try:
        arrived = handoff.arrive(request.causal, request.GET.get("t", ""))
    except handoff.BadHandoff as exc:
        return page(request, 400, "Cannot travel with this link", str(exc))
    messages.info(request, f"You travelled from {arrived.origin} to {request.causal.ctx.region}.")
    return redirect("home")
