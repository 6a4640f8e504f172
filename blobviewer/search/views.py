"""Find in a session: the find box's hits, opened on the timeline or in their blob."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode, urlsplit

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from blobviewer.models import Session
from blobviewer.responses import positive_int
from blobviewer.search.results import FIND_PARAM, OPEN_PARAM, anchor_of, find_state, same_page


@require_safe
def session_find(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Find in a session: open hit `hit` of `q` on the timeline (its page, at its anchor,
    with the find box saying where it is), or with `open=blob` the blob's page at the hit.
    For htmx, when the hit is on the page on screen, only the find box is swapped and the
    page scrolls to the hit; otherwise the browser goes there."""
    session = get_object_or_404(Session, id=session_id)
    state = find_state(session, request.GET.get("q"), positive_int(request.GET.get("hit")))
    target = state.step_url or _session_page_finding(session, state.text)
    if request.GET.get(OPEN_PARAM) == "blob" and state.hit and state.hit.blob_url:
        return redirect(state.hit.blob_url)  # `open=blob`: the blob's page at the hit
    if not request.htmx:
        return redirect(target)
    current = request.htmx.current_url or ""
    on_screen = urlsplit(current).path == session.get_absolute_url()
    if state.step_url and not (on_screen and same_page(state.step_url, urlsplit(current).query)):
        response = HttpResponse(status=200)
        response["HX-Redirect"] = state.step_url
        return response
    response = render(request, "_find_in_session_box.html", {"find": state})
    patch_vary_headers(response, ["HX-Request", "HX-Current-URL"])
    if state.step_url:
        response["HX-Push-Url"] = state.step_url
        response["HX-Reswap"] = f"outerHTML show:#{anchor_of(state.step_url)}:top"
    return response


def _session_page_finding(session: Session, text: str) -> str:
    url = session.get_absolute_url()
    return f"{url}?{urlencode({FIND_PARAM: text})}" if text else url
