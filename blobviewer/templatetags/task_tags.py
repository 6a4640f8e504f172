"""The other runs of a session's task on its page (blobviewer.timeline.tasks):
`{% other_runs session %}` lists them, newest first, with their outcome and cost, each
with a link comparing it with this one. One query, none for a session with no task."""

from __future__ import annotations

from typing import Any

from django import template

from blobviewer.models import Session
from blobviewer.timeline.tasks import PROMPT_TASK, SHOWN_RUNS, other_runs

register = template.Library()


@register.inclusion_tag("_other_runs.html")
def other_runs_of(session: Session) -> dict[str, Any]:
    """`runs`: up to SHOWN_RUNS other runs of the task; `more`: whether there are others;
    `task`: the task as a reader names it (a task known by its first message says so)."""
    runs = list(other_runs(session)[: SHOWN_RUNS + 1])
    by_prompt = session.task.startswith(PROMPT_TASK)
    return {
        "session": session,
        "runs": runs[:SHOWN_RUNS],
        "more": len(runs) > SHOWN_RUNS,
        "task": "the same first message" if by_prompt else session.task,
        "by_prompt": by_prompt,
    }
