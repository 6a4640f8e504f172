"""The blob list (`/blobs/`): its rows, the choices of its filters, its sort headers.

Every column comes from the Blob row and its maker's item and session (one join), never
from the store: the tool and argument and the preview were stored when the blob and its
session came in (blobviewer.catalog.provenance).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Count, QuerySet

from blobviewer.forms import BlobFilterForm
from blobviewer.models import Blob, Session

# The sessions the session filter offers (newest first, those with blobs); one chosen by
# its URL is offered too, wherever it is.
SESSION_CHOICES = 100
# A sortable column's key, and whether its first click sorts descending.
SORTABLE = {"size": True, "created": True}


def blob_rows(form: BlobFilterForm) -> QuerySet[Blob]:
    """The blobs the form asks for, each with `session_count` (sessions that refer to
    it) and its maker's step and session at hand, without reading what the step said."""
    blobs = (
        Blob.objects.annotate(session_count=Count("refs__session", distinct=True))
        .select_related("made_by__session")
        .only(
            "id",
            "kind",
            "size",
            "count",
            "created_at",
            "missing",
            "error",
            "made_by_title",
            "preview",
            "made_by__id",
            "made_by__seq",
            "made_by__tool",
            "made_by__at",
            "made_by__session__id",
            "made_by__session__title",
        )
    )
    return form.filter(blobs)


def filter_choices(form: BlobFilterForm) -> dict[str, Any]:
    """The kinds, tools and sessions the filters offer, and the session chosen."""
    kinds = Blob.objects.exclude(kind="").order_by("kind").values_list("kind", flat=True)
    tools = (
        Blob.objects.filter(made_by__isnull=False)
        .exclude(made_by__tool="")
        .order_by("made_by__tool")
        .values_list("made_by__tool", flat=True)
        .distinct()
    )
    sessions = list(
        Session.objects.filter(blob_count__gt=0)
        .order_by("-created_at", "-id")
        .only("id", "title", "created_at")[:SESSION_CHOICES]
    )
    chosen = _chosen_session(form)
    if chosen is not None and all(session.id != chosen.id for session in sessions):
        sessions.insert(0, chosen)
    return {
        "kinds": list(kinds.distinct()),
        "tools": list(tools),
        "sessions": sessions,
        "chosen_session": chosen,
    }


def _chosen_session(form: BlobFilterForm) -> Session | None:
    session_id = getattr(form, "cleaned_data", {}).get("session")
    if not isinstance(session_id, uuid.UUID):
        return None
    return Session.objects.filter(id=session_id).only("id", "title", "created_at").first()


def sort_headers(sort_key: str) -> dict[str, dict[str, str]]:
    """For each sortable column: the sort its header link asks for (the other direction
    when the list is sorted by it) and its `aria-sort` ("" when not sorted by it), as
    templates/_sort_header.html takes them."""
    column, descending = sort_key.removeprefix("-"), sort_key.startswith("-")
    headers = {}
    for key, descending_first in SORTABLE.items():
        if key == column:
            wanted = not descending
            aria = "descending" if descending else "ascending"
        else:
            wanted, aria = descending_first, ""
        headers[key] = {"sort": f"{'-' if wanted else ''}{key}", "aria": aria}
    return headers
