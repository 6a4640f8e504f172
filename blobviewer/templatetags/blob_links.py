"""Template helpers that turn `[blob:<id>]` references and inspect calls into links.

Nothing here marks content safe: text is cut into segments and the templates escape each
one as they print it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from django import template

from blobviewer.models import Blob, Item
from core.blob_id import BLOB_REF
from core.json_values import dumps_compact

register = template.Library()

ITEM_TEXT_CHARS = 20_000  # longer item texts are cut on the timeline


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    blob_id: uuid.UUID | None = None
    blob: Blob | None = None


@dataclass(frozen=True, slots=True)
class InspectTarget:
    blob_id: uuid.UUID
    selector: str


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


@register.inclusion_tag("_blob_text.html")
def blob_text(text: str, item: Item) -> dict[str, Any]:
    """An item's text or output, with each blob reference opening the blob under the item."""
    blobs = {ref.blob_id: ref.blob for ref in item.blob_refs.all()}
    shown = text[:ITEM_TEXT_CHARS]
    return {
        "segments": blob_segments(shown, blobs),
        "target": f"item-{item.seq}-blob",
        "cut": len(text) - len(shown),
    }


@register.filter
def inspect_target(call: dict[str, Any]) -> InspectTarget | None:
    """The blob and selector an `inspect` tool call asked for; None for other calls."""
    if not isinstance(call, dict) or call.get("name") != "inspect":
        return None
    arguments = call.get("arguments")
    if isinstance(arguments, str):  # some clients record the arguments as a JSON string
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(arguments, dict):
        return None
    try:
        blob_id = uuid.UUID(str(arguments.get("blob_id", "")).strip())
    except ValueError:
        return None
    selector = arguments.get("selector")
    return InspectTarget(blob_id, selector if isinstance(selector, str) else "")


@register.filter
def compact_json(value: Any) -> str:
    try:
        return dumps_compact(value)
    except (TypeError, ValueError):
        return repr(value)
