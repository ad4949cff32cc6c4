"""Error pages: a clear message and a way back, never a stack trace."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    return render(
        request, "error.html", {"status": status, "title": title, "message": message}, status=status
    )


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return page(
        request, 400, "Bad request", str(exception) if exception else "That request made no sense to us."
    )


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return page(request, 403, "Not allowed", "You are not allowed to do that.")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return page(request, 404, "Not found", "There is nothing here (or not in this region yet).")


def server_error(request: HttpRequest) -> HttpResponse:
    return page(request, 500, "Something went wrong", "An error on our side; it has been logged.")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return page(
        request, 403, "Form expired",
        "This form could not be verified (its security token is missing or old). "
        "Reload the page and try again.",
    )  # fmt: skip
