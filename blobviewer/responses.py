"""How every page answers: the whole page, or for htmx requests only the fragment that
changes (`template.html#partial`), so links work with and without JavaScript; plain text for
the API."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers

from core.content import encode_text


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    fragment: str,
    status: int = 200,
) -> HttpResponse:
    """The whole *template*, or only *fragment* (`name.html#partial`) for htmx requests.

    A history restore (htmx found no cached copy of a page) needs the whole page.
    """
    if request.htmx and not request.htmx.history_restore_request:
        template = fragment
    response = render(request, template, context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


def positive_int(value: str | None, default: int = 1) -> int:
    try:
        number = int(value or default)
    except ValueError:
        return default
    return number if number >= 1 else default


# How long a client should wait before it asks again after a 503 (seconds).
RETRY_AFTER_SECONDS = 30


def plain_text(text: str, *, status: int = 200) -> HttpResponse:
    # encode_text keeps lone surrogates as the store does, instead of failing on them.
    response = HttpResponse(
        encode_text(text), content_type="text/plain; charset=utf-8", status=status
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response
