"""The site's own middleware: the Content-Security-Policy header (Django 5.2 has none built
in), and the 503 of a request whose blob store does not answer."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from blobviewer.responses import RETRY_AFTER_SECONDS, plain_text
from core.store import StoreUnavailable

logger = logging.getLogger(__name__)
NOT_ANSWERING = "The blob store is not answering; try again in a moment."


class ContentSecurityPolicyMiddleware:
    """Send settings.CONTENT_SECURITY_POLICY on every response that has not set its own.

    Blob and session content is untrusted; even if something slipped past escaping, the
    policy forbids inline script, so nothing injected can run.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class StoreUnavailableMiddleware:
    """Answer 503 with one plain sentence when a view's blob store does not answer
    (core.store.StoreUnavailable): never a 500, and never what the store's error says,
    which may name its endpoint or bucket (that goes to the log)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, StoreUnavailable):
            return None
        logger.warning("%s %s: %s", request.method, request.path, exception)
        if request.path_info.startswith("/api/"):
            response = plain_text(NOT_ANSWERING + "\n", status=503)
        else:
            response = render(request, "503.html", status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
