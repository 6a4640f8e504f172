"""Template helpers that turn `[blob:<id>]` references into links.

Nothing here marks content safe: text is cut into segments and the templates escape each
one as they print it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django import template

from blobviewer.models import Blob
from core.json_values import dumps_compact
from core.store.blob_id import BLOB_REF

register = template.Library()


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    blob_id: uuid.UUID | None = None
    blob: Blob | None = None


def blob_segments(text: str, blobs: dict[uuid.UUID, Blob] | None = None) -> list[Segment]:
    """*text* as plain segments and `[blob:<id>]` segments, in order."""
    blobs = blobs or {}
    segments: list[Segment] = []
    position = 0
    for match in BLOB_REF.finditer(text):
        if match.start() > position:
            segments.append(Segment(text[position : match.start()]))
        blob_id = uuid.UUID(match.group(1))
        segments.append(Segment(match.group(0), blob_id, blobs.get(blob_id)))
        position = match.end()
    if position < len(text):
        segments.append(Segment(text[position:]))
    return segments


@register.filter
def compact_json(value: Any) -> str:
    try:
        return dumps_compact(value)
    except (TypeError, ValueError):
        return repr(value)
