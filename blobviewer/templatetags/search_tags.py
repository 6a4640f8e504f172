"""The find box of a session page (`{% find_in_session %}`), and durations as people read them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template

from blobviewer.models import Session
from blobviewer.search_results import FIND_PARAM, HIT_PARAM, SessionHits, find_state

register = template.Library()


@register.inclusion_tag("_find_in_session_box.html", takes_context=True)
def find_in_session(context: template.Context) -> dict[str, Any]:
    """The find box for the page's `session`, at the hit its URL names (`?find=…&hit=N`).
    Without a `find` parameter it is the empty box, and asks the database nothing."""
    request = context["request"]
    try:
        number = int(request.GET.get(HIT_PARAM) or 1)
    except ValueError:
        number = 1
    return {"find": find_state(context["session"], request.GET.get(FIND_PARAM), number)}


@register.filter
def hits_of(hits: dict[Any, SessionHits], session: Session) -> SessionHits | None:
    """The session list's hits under *session* (`hits|hits_of:session`)."""
    return hits.get(session.pk)


@register.filter
def short_duration(value: timedelta | None) -> str:
    """`850 ms`, `42 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h`; "" for None."""
    if value is None:
        return ""
    seconds = value.total_seconds()
    if seconds < 0:
        return ""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"
