"""A Content-Security-Policy on every response: the pages load scripts, styles, images and
their live updates from their own origin only, and carry no inline script or style, so an
injected ``<script>`` or ``onclick`` would not run even if a tweet's escaping ever failed. Form
posts are not limited: the travel hand-off posts to another region's origin (depart.html)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join([
    "default-src 'self'",
    "img-src 'self' data:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
])  # fmt: skip


class ContentSecurityPolicy:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
