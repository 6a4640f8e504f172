"""What the session page and an item's own page show: their template context, and the
link from other pages to where the timeline shows an item.

The timeline's parts are each a module of this package: `skeleton` (a session's items
without their texts), `steps` (items as steps under their turns), `paging` (how big a page
is and how units are cut into pages), `parsed` (what every page of a session shares),
`timeline` (one filter's pages and links), `previews` (the start of each text shown).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from blobviewer.models import Item, Session
from blobviewer.timeline.paging import META_BYTES
from blobviewer.timeline.previews import item_blob_refs, timeline_items
from blobviewer.timeline.steps import StepFilter
from blobviewer.timeline.timeline import Timeline
from blobviewer.timeline.tool_args import arguments_view

# The views load an item with its blob references as the timeline does.
__all__ = ["item_blob_refs", "item_page_context", "page_context", "step_url"]


def step_url(session: Session, seq: int) -> str:
    """The timeline URL that shows item *seq* of *session*: its page and its anchor
    (`#step-<seq>` for a tool result with its call, else `#item-<seq>`). For links from
    other pages (an item's page, search hits)."""
    return Timeline(session, StepFilter()).item_href(seq)


def page_context(session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    """Everything the session page shows for *query* (`page`, `errors`, `blobs`, `tool`,
    `outline=biggest`); a page number out of range shows the nearest page, `page=last`
    the last one."""
    timeline = Timeline(session, StepFilter.from_query(query), query=query)
    count = timeline.layout.page_count
    try:
        asked = count if query.get("page") == "last" else int(query.get("page") or 1)
        number = min(max(asked, 1), count)
    except ValueError:
        number = 1
    units = timeline.page(number)
    steps = [step for unit in units for step in unit.steps]
    biggest = query.get("outline") == "biggest"
    return {
        "session": session,
        "timeline": timeline,
        "filter": timeline.filter,
        "units": units,
        "page_number": number,
        "page_count": count,
        "prev_url": timeline.page_url(number - 1) if number > 1 else "",
        "next_url": timeline.page_url(number + 1) if number < count else "",
        "first_step": steps[0].step.seq if steps else None,
        "last_step": steps[-1].step.seq if steps else None,
        "steps_on_page": len(steps),
        "outline": timeline.outline(number, biggest=biggest),
        "biggest": biggest,
        "outline_url": _toggled(timeline, number, biggest=not biggest),
        "counts": timeline.counts,
        # The address of what is shown, without empty or unknown parameters.
        "canonical_url": timeline.page_url(number),
        # Called by the template only when it draws the header (not for htmx swaps).
        "chart": partial(timeline.chart, number),
        "meta": {"args": arguments_view("", session.meta, budget=META_BYTES)}
        if session.meta
        else None,
    }


def _toggled(timeline: Timeline, number: int, *, biggest: bool) -> str:
    query = timeline.query.copy()
    query.pop("outline", None)
    if biggest:
        query["outline"] = "biggest"
    if number > 1:
        query["page"] = str(number)
    encoded = query.urlencode()
    return f"{timeline.url}?{encoded}" if encoded else timeline.url


def item_page_context(item: Item) -> dict[str, Any]:
    """An item's own page: a tool result as its step (arguments and output whole), an
    assistant item with its calls (arguments whole), a message whole; and the link back
    to where the timeline shows it."""
    timeline = Timeline(item.session, StepFilter())
    context: dict[str, Any] = {
        "item": item,
        "session": item.session,
        "timeline_url": timeline.item_href(item.seq),
        "shown": None,
        "shown_steps": [],
        "result": item if item.type == Item.Type.TOOL_RESULT else None,
    }
    if item.type == Item.Type.TOOL_RESULT:
        step = timeline.step_of_result(item.seq)
        if step is not None:
            items = {item.seq: item}
            if step.assistant is not None:
                items[step.assistant.seq] = item.session.items.get(seq=step.assistant.seq)
            context["shown"] = timeline.shown_step(step, items, args_budget=None)
    elif item.type == Item.Type.ASSISTANT:
        steps = [
            s for s in timeline.steps if s.assistant is not None and s.assistant.seq == item.seq
        ]
        results = {s.result.seq for s in steps if s.result is not None}
        items = {
            loaded.seq: loaded for loaded in timeline_items(item.session).filter(seq__in=results)
        }
        items[item.seq] = item
        context["shown_steps"] = [timeline.shown_step(s, items, args_budget=None) for s in steps]
    return context
