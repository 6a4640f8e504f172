"""The compare pages: two runs side by side (`/compare/<a>/<b>/`), a step pair's output
diff (`…/diff?a=<seq>&b=<seq>&page=N`), and choosing a run to compare one with
(`/sessions/<id>/compare/`)."""

from __future__ import annotations

import uuid

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_safe

from blobviewer.compare.pages import compare_context, diff_page, step_output
from blobviewer.models import Session
from blobviewer.responses import positive_int, render_page
from blobviewer.timeline.tasks import SHOWN_RUNS, other_runs
from core.store import BlobCorrupt, BlobNotFound

# Sessions a search for one to compare with lists.
FOUND_SHOWN = 20
# Pages of one output diff at most (each page reads past the ones before it).
MAX_DIFF_PAGE = 500


@require_safe
def compare(request: HttpRequest, a: uuid.UUID, b: uuid.UUID) -> HttpResponse:
    run_a = get_object_or_404(Session, id=a)
    run_b = get_object_or_404(Session, id=b)
    context = compare_context(run_a, run_b, request.GET)
    return render_page(request, "compare.html", context, fragment="compare.html#rows")


@require_safe
def compare_diff(request: HttpRequest, a: uuid.UUID, b: uuid.UUID) -> HttpResponse:
    """The diff of step `a` (a seq) of run A and step `b` of run B, a page at a time."""
    run_a = get_object_or_404(Session, id=a)
    run_b = get_object_or_404(Session, id=b)
    found_a = step_output(run_a, positive_int(request.GET.get("a")))
    found_b = step_output(run_b, positive_int(request.GET.get("b")))
    if found_a is None or found_b is None:
        raise Http404("No such step in one of the runs.")
    (item_a, output_a), (item_b, output_b) = found_a, found_b
    # Pages count from 1 in the URL; page N walks the pages before it, so N is capped.
    page = min(positive_int(request.GET.get("page")), MAX_DIFF_PAGE) - 1
    context = {"a": run_a, "b": run_b, "item_a": item_a, "item_b": item_b, "diff": None}
    try:
        context["diff"] = diff_page(output_a, output_b, page)
    except (BlobNotFound, BlobCorrupt) as error:
        context["unreadable"] = str(error)
    return render_page(request, "compare_diff.html", context, fragment="_compare_diff.html")


@require_safe
def compare_pick(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Choosing a run to compare *session_id* with: the other runs of its task first,
    then any session whose title has `q`."""
    session = get_object_or_404(Session, id=session_id)
    query = request.GET.get("q", "").replace("\x00", "").strip()[:200]
    found = []
    if query:
        found = list(
            Session.objects.filter(title__icontains=query)
            .exclude(id=session.id)
            .order_by("-created_at", "-id")[:FOUND_SHOWN]
        )
    context = {
        "session": session,
        "runs": list(other_runs(session)[:SHOWN_RUNS]),
        "query": query,
        "found": found,
    }
    return render_page(request, "compare_pick.html", context, fragment="compare_pick.html#found")
