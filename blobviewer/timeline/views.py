"""The session pages: the list of recorded runs, one run as a timeline, one item whole."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import Count, QuerySet, Sum, Window
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_safe

from blobviewer.forms import SessionFilterForm
from blobviewer.models import Item, Session
from blobviewer.responses import positive_int, render_page
from blobviewer.search.results import list_hits
from blobviewer.timeline.jobs import job_rates
from blobviewer.timeline.pages import item_blob_refs, item_page_context, page_context
from blobviewer.timeline.sort import headers as sort_headers
from blobviewer.timeline.tasks import PROMPT_TASK, TASKS_PER_PAGE, task_groups

SESSIONS_PER_PAGE = 50
# A search shows fewer sessions a page (each with its hits), and counts its sessions only
# as far as the page it shows, and one more to know that another follows ("10+
# sessions"): its cost is that of its page. It pages through the first SEARCH_MAX_PAGE
# pages; the sessions after them are reached by narrowing the search.
SEARCH_SESSIONS_PER_PAGE = 10
SEARCH_MAX_PAGE = 100
# A session that grew this recently is marked live in the list (which then refreshes).
LIVE_WINDOW = timedelta(minutes=1)
# No list has more pages; a larger number asked for is its last page (the number must stay
# an offset both databases take).
MAX_PAGE = 1_000_000

# What replaces an item's cut copy on the timeline, by the item's type.
_ITEM_FRAGMENTS = {
    Item.Type.TOOL_RESULT: "_step_result.html",
    Item.Type.ASSISTANT: "_turn_text.html",
    Item.Type.USER: "_message.html",
}


# The columns the totals row sums, by the names the template gives them.
_SUMMED = {
    "items": "item_count",
    "steps": "step_count",
    "errors": "error_count",
    "blobs": "blob_count",
    "received": "output_bytes_received",
    "in_history": "output_bytes_in_history",
}
# The totals row of the list, over every matching session: window functions over the
# page's own statement, so the page and its totals are one statement.
_TOTALS = {"sessions": Count("pk"), **{name: Sum(column) for name, column in _SUMMED.items()}}


def _page_and_totals(sessions: QuerySet[Session], number: int) -> tuple[Page, dict[str, int]]:
    """Page *number* of *sessions* and the totals over all of them, from one statement
    (for a page past the end, which shows the last page instead, two more)."""
    windows = {f"total_{name}": Window(expression) for name, expression in _TOTALS.items()}
    start = (number - 1) * SESSIONS_PER_PAGE
    rows = list(sessions.annotate(**windows)[start : start + SESSIONS_PER_PAGE])
    if rows:
        totals = {name: getattr(rows[0], f"total_{name}") or 0 for name in _TOTALS}
    else:  # no session matches, or the page is past the end
        found = sessions.order_by().aggregate(**_TOTALS)
        totals = {name: value or 0 for name, value in found.items()}
    totals["kept_out"] = max(0, totals["received"] - totals["in_history"])
    paginator = Paginator(sessions, SESSIONS_PER_PAGE)
    paginator.count = totals["sessions"]
    page = paginator.get_page(number)
    if page.number != number:  # past the end
        return _page_and_totals(sessions, page.number)
    page.object_list = rows
    return page, totals


def _search_page_and_totals(
    sessions: QuerySet[Session], number: int
) -> tuple[Page, dict[str, int]]:
    """Page *number* of a search's *sessions*, and its count and totals, from the sessions
    up to the end of that page and one more, in the list's order: one statement, so the
    match runs once for all three. When that one more is there, `capped`: the page says
    "N+ sessions" (N those up to its end), offers the next page, and sums nothing."""
    number = min(number, SEARCH_MAX_PAGE)
    end = number * SEARCH_SESSIONS_PER_PAGE
    # The whole rows (the list shows no session's meta): those before the page are few
    # (SEARCH_MAX_PAGE), and one statement fewer costs less than reading them twice.
    found = list(sessions.defer("meta")[: end + 1])
    capped = len(found) > end
    paginator = Paginator(sessions, SEARCH_SESSIONS_PER_PAGE)
    # One past the end names a next page, except on the last page offered.
    paginator.count = len(found) if number < SEARCH_MAX_PAGE else min(len(found), end)
    found = found[:end]
    totals = {
        name: sum(getattr(session, column) for session in found) for name, column in _SUMMED.items()
    }
    totals.update(sessions=len(found), capped=int(capped))
    totals["kept_out"] = max(0, totals["received"] - totals["in_history"])
    page = paginator.get_page(number)  # past the end: the last page, from the rows found
    start = (page.number - 1) * SEARCH_SESSIONS_PER_PAGE
    page.object_list = found[start : start + SEARCH_SESSIONS_PER_PAGE]
    return page, totals


@require_safe
def session_list(request: HttpRequest) -> HttpResponse:
    form = SessionFilterForm(request.GET)
    sessions = form.filter(Session.objects.all())
    number = min(positive_int(request.GET.get("page")), MAX_PAGE)
    if request.GET.get("group") == "task":
        return _task_list(request, form, sessions, number)
    if form.query is not None:
        page, totals = _search_page_and_totals(sessions, number)
    else:
        page, totals = _page_and_totals(sessions, number)
    # Read when shown: the filter's choices are not in the list that htmx swaps.
    jobs = SimpleLazyObject(job_rates)
    chosen = form.cleaned_data.get("job", "") if form.is_valid() else ""
    job_rate = next((rate for rate in jobs if rate.job == chosen), None) if chosen else None
    if chosen and job_rate is None:  # an older job than the filter offers
        job_rate = next(iter(job_rates(chosen)), None)
    context = {
        "jobs": jobs,
        "job_rate": job_rate,
        "form": form,
        "page": page,
        "totals": totals,
        "models": SimpleLazyObject(_models),
        "query": form.query,
        "hits": list_hits(form.query, page.object_list),
        "sort": form.sort,
        "sort_headers": sort_headers(form.sort),
        "live_since": timezone.now() - LIVE_WINDOW,
    }
    return render_page(request, "session_list.html", context, fragment="session_list.html#list")


def _task_list(
    request: HttpRequest, form: SessionFilterForm, sessions: QuerySet[Session], number: int
) -> HttpResponse:
    """The list grouped by task (`?group=task`): a row per task, linking to its runs."""
    page = Paginator(task_groups(sessions), TASKS_PER_PAGE).get_page(number)
    context = {
        "form": form,
        "grouped": True,
        "page": page,
        "jobs": SimpleLazyObject(job_rates),
        "models": SimpleLazyObject(_models),
        "prompt_task": PROMPT_TASK,
    }
    return render_page(request, "session_list.html", context, fragment="session_list.html#list")


def _models() -> list[str]:
    """The models sessions name, in order: each the least one after the one before, from
    the index on the model (a step each, where DISTINCT reads every session's: 2.4 ms at
    20,000 sessions on PostgreSQL)."""
    table = connection.ops.quote_name(Session._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE models(model) AS ("
            f" SELECT MIN(model) FROM {table} WHERE model > %s"
            f" UNION ALL SELECT (SELECT MIN(model) FROM {table} WHERE model > models.model)"
            f" FROM models WHERE models.model IS NOT NULL"
            f") SELECT model FROM models WHERE model IS NOT NULL",
            [""],
        )
        return [model for (model,) in cursor.fetchall()]


@require_safe
def session_detail(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """The run as steps (see blobviewer.timeline.pages); htmx gets the outline and the steps."""
    session = get_object_or_404(Session, id=session_id)
    context = page_context(session, request.GET)
    response = render_page(
        request, "session_detail.html", context, fragment="session_detail.html#body"
    )
    if request.htmx and not request.htmx.history_restore_request:
        # The address bar shows `?errors=1`, not the form's `?errors=1&tool=`.
        response["HX-Push-Url"] = context["canonical_url"]
    return response


@require_safe
def session_live(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Whether the session grew past the `items` and `steps` its page shows (`?items=N
    &steps=M`), for the page's live follow (static/js/timeline.js): 204 when it did not,
    else the bar that says what is new. One query whatever the session's size."""
    row = Session.objects.filter(id=session_id).values("item_count", "step_count").first()
    if row is None:
        raise Http404("No session has this id.")
    items = positive_int(request.GET.get("items"), default=0)
    steps = positive_int(request.GET.get("steps"), default=0)
    if row["item_count"] <= items:
        return HttpResponse(status=204)
    context = {
        "items": row["item_count"],
        "steps": row["step_count"],
        "new_items": row["item_count"] - items,
        "new_steps": max(0, row["step_count"] - steps),
    }
    return render(request, "_live_bar.html", context)


@require_safe
def item_detail(request: HttpRequest, session_id: uuid.UUID, seq: int) -> HttpResponse:
    """One item whole. For htmx, what replaces its cut copy on the timeline (the output,
    the text, the message); or, into the slot under a step, the output the model got."""
    item = get_object_or_404(
        Item.objects.select_related("session").prefetch_related(item_blob_refs()),
        session_id=session_id,
        seq=seq,
    )
    context = item_page_context(item)
    target = request.htmx.target if request.htmx else None
    if target == f"item-{seq}-blob" and item.type == Item.Type.TOOL_RESULT:
        fragment = "_output_in_place.html"
    else:
        fragment = _ITEM_FRAGMENTS.get(item.type, "_message.html")
    return render_page(request, "item_detail.html", {**context, "whole": True}, fragment=fragment)
