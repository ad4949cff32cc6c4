"""Error pages: a clear message and a way back, never a stack trace, an internal address or a
setting's name. Every error status gets a page, also the ones a view or Django returns with an
empty body (405, 429, ...), and a client's error is logged in one line, not as a traceback."""

from __future__ import annotations

import logging
from http import HTTPStatus

from django.core.exceptions import BadRequest, RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class ShownBadRequest(BadRequest):
    """A bad request whose message was written for the person who made it (shown as it is);
    any other exception's text stays in the log."""


def page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    return render(
        request, "error.html", {"status": status, "title": title, "message": message}, status=status
    )


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, ShownBadRequest):
        return page(request, 400, "Bad request", str(exception))
    if isinstance(exception, RequestDataTooBig):
        return page(request, 413, "Too big", "That request was larger than this site accepts.")
    if isinstance(exception, TooManyFieldsSent):
        return page(request, 400, "Bad request", "That request had too many fields.")
    return page(request, 400, "Bad request", "That request made no sense to us.")


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


MESSAGES = {
    405: "This page does not take that kind of request.",
    429: "Too many requests; wait a moment and try again.",
}


class ErrorPages:
    """Middleware: an error response without a body (``require_POST``'s 405, a bare status) gets
    the site's error page, its headers (``Allow``) kept."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or response.streaming or response.content:
            return response
        status = response.status_code
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:  # a status the standard does not name
            phrase = "Error"
        filled = page(request, status, phrase, MESSAGES.get(status, "That did not work."))
        for header in ("Allow", "Retry-After"):
            if header in response:
                filled[header] = response[header]
        return filled


class OneLineClientErrors(logging.Filter):
    """Drops the traceback from the log records of client errors (4xx: a bad request, a
    suspicious one, a forbidden one): the one line says what happened; tracebacks stay for 5xx."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            record.exc_info, record.exc_text = None, None
        return True
