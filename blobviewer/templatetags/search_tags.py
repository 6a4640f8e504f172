"""The find box of a session page (`{% find_in_session %}`), and durations as people read them."""

from __future__ import annotations

from typing import Any

from django import template

from blobviewer.models import Session
from blobviewer.search.results import FIND_PARAM, HIT_PARAM, SessionHits, find_state

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
