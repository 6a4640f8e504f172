"""Runs of the same task (docs/pages.md#runs-of-the-same-task): which task a session
worked on, where its recording says (a Harbor trial's task, an evaluation's instance id),
else the digest of its first user message, so that two runs given the same prompt are
runs of one task; and the other runs of a session's task, for its page."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import Coalesce

from blobviewer.models import Session

# A task known only by its first user message: this, then the digest of that message.
PROMPT_TASK = "prompt:"
# Other runs listed on a session's page, and what the list shows of each.
SHOWN_RUNS = 20
_RUN_FIELDS = (
    "id",
    "title",
    "model",
    "created_at",
    "started_at",
    "ingested_at",
    "outcome",
    "reward",
    "cost_usd",
    "unpriced_turns",
    "step_count",
    "error_count",
)


def recorded_task(header: Mapping[str, Any]) -> str:
    """The task the recording names: the header's (a Harbor trial's), else its meta's
    `instance_id` (SWE-agent, mini-swe-agent, OpenHands evaluations); else ""."""
    meta = header.get("meta")
    instance = meta.get("instance_id") if isinstance(meta, Mapping) else None
    for task in (header.get("task"), instance):
        if isinstance(task, str) and task.strip():
            return task.strip()
    return ""


def prompt_task(records: Iterable[Mapping[str, Any]]) -> str:
    """The task of a run known by its first user message (the one with the lowest seq of
    *records*, not a system or other role's): `prompt:` and a digest of its words; "" when
    *records* hold none."""
    first = min(
        (r for r in records if r.get("type") == "user" and not r.get("role")),
        key=lambda r: r.get("seq", 0),
        default=None,
    )
    text = " ".join(str(first.get("text") or "").split()) if first is not None else ""
    if not text:
        return ""
    return PROMPT_TASK + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def other_runs(session: Session) -> QuerySet[Session]:
    """The other sessions of *session*'s task, newest first (none when it has no task)."""
    if not session.task:
        return Session.objects.none()
    return (
        Session.objects.filter(task=session.task)
        .exclude(id=session.id)
        .order_by("-created_at", "-id")
        .only(
            "id", "title", "model", "created_at", "outcome", "reward", "step_count", "error_count"
        )
    )


# Tasks on a page of the list grouped by task.
TASKS_PER_PAGE = 50


def task_groups(sessions: QuerySet[Session]) -> QuerySet[Any]:
    """*sessions* (the list's, filtered) by task, the task run most recently first: each
    task's runs, how many ended and passed (docs/evaluations.md), and a title of one of
    them. Sessions with no task are left out."""
    return (
        sessions.exclude(task="")
        .order_by()
        .values("task")
        .annotate(
            runs=Count("pk"),
            ended=Count("pk", filter=~Q(outcome="")),
            passed=Count("pk", filter=Q(outcome="pass")),
            title=Min("title"),
            latest=Max(Coalesce("started_at", "ingested_at")),
        )
        .order_by("-latest", "task")
    )
