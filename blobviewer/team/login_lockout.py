"""The answer to a login that django-axes refuses: 429 and a page that says why and for how
long (axes' AXES_LOCKOUT_CALLABLE; its own answer is a bare line of text)."""

from __future__ import annotations

import math
from typing import Any

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def lockout_response(
    request: HttpRequest,
    original_response: HttpResponse | None = None,
    credentials: dict[str, Any] | None = None,
) -> HttpResponse:
    """Render templates/login_locked.html with status 429 for a locked username+address.

    The page names the wait in whole minutes (the cool-off counts from the last failed
    try, so trying again while locked starts it over) and links back to the form used.
    """
    cool_off = get_cool_off(request)
    minutes = math.ceil(cool_off.total_seconds() / 60) if cool_off else None
    context = {"minutes": minutes, "login_url": request.path}
    return render(request, "login_locked.html", context, status=429)
