"""A health check for the launcher: the process serves requests (no store call)."""

from django.http import HttpRequest, HttpResponse

from webapp.context import current


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"ok {current().region}\n", content_type="text/plain")
