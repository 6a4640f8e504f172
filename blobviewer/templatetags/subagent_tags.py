"""The sessions of a run's sub-agents on its page, and the run a sub-agent worked for.

An importer names a sub-agent session's parent in its meta (`parent_session_id`, the
parent's id as the site spells it: Claude Code's `subagents/` logs), and says so with
`SUBAGENTS = True` in its module. `{% subagent_links session %}` lists a session's
sub-agents with links (one query, made only for sessions of such a format), and on a
sub-agent's page links back to its parent.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import template

from blobviewer.ingest.importers.detect import IMPORTERS
from blobviewer.models import Session

register = template.Library()

SHOWN = 100  # sub-agents listed on a page; the rest are counted


@register.inclusion_tag("_subagents.html")
def subagent_links(session: Session) -> dict[str, Any]:
    """`children`: the first SHOWN sub-agent sessions of *session*, oldest first, and
    `more`, how many others; `parent_id` / `parent`: the session this one is a sub-agent
    of (`parent` None when that session is not recorded here)."""
    children: list[Session] = []
    if getattr(IMPORTERS.get(session.source_format), "SUBAGENTS", False):
        children = list(
            Session.objects.filter(meta__parent_session_id=str(session.id))
            .order_by("created_at", "id")
            .only("id", "title", "created_at", "step_count", "error_count")[: SHOWN + 1]
        )
    more = 0
    if len(children) > SHOWN:
        more = Session.objects.filter(meta__parent_session_id=str(session.id)).count() - SHOWN
        children = children[:SHOWN]
    meta = session.meta if isinstance(session.meta, dict) else {}
    parent_id = meta.get("parent_session_id")
    parent = None
    if isinstance(parent_id, str):
        try:
            parent = Session.objects.filter(id=uuid.UUID(parent_id)).only("id", "title").first()
        except ValueError:
            parent = None
    else:
        parent_id = None
    return {"children": children, "more": more, "parent_id": parent_id, "parent": parent}
