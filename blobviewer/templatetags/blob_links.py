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
from blobviewer.timeline import CALL_ARGS_BYTES, CALLS_SHOWN, Preview, preview
from core.blob_id import BLOB_REF
from core.content import utf8_size
from core.json_values import dumps_compact

register = template.Library()


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


@register.inclusion_tag("_item_body.html")
def item_body(item: Item, *, whole: bool = False) -> dict[str, Any]:
    """An item's output (tool results) or text, with each blob reference opening the blob
    under the item. On the timeline (not *whole*) only its start, from the item's
    `body_head` and `body_bytes` (see blobviewer.timeline), and a link to the rest."""
    if whole:
        shown = Preview(item.output if item.type == Item.Type.TOOL_RESULT else item.text, 0)
    else:
        shown = preview(item.body_head or "", item.body_bytes or 0)
    blobs = {ref.blob_id: ref.blob for ref in item.blob_refs.all()}
    return {
        "shown": shown.text or item.type == Item.Type.TOOL_RESULT,
        "segments": blob_segments(shown.text, blobs),
        "target": f"item-{item.seq}-blob",
        "more_bytes": shown.more_bytes,
        "item": item,
        "item_url": item.get_absolute_url(),
    }


@register.inclusion_tag("_item_calls.html")
def item_calls(item: Item, *, whole: bool = False) -> dict[str, Any]:
    """An assistant item's tool calls; on the timeline the first few, arguments cut."""
    calls = [call for call in item.tool_calls if isinstance(call, dict)]
    listed = calls if whole else calls[:CALLS_SHOWN]
    shown = []
    for call in listed:
        arguments = compact_json(call.get("arguments"))
        cut = (
            Preview(arguments, 0)
            if whole
            else preview(arguments, utf8_size(arguments), budget=CALL_ARGS_BYTES)
        )
        shown.append(
            {
                "name": call.get("name"),
                "id": call.get("id"),
                "arguments": cut.text,
                "more_bytes": cut.more_bytes,
                "target": inspect_target(call),
            }
        )
    return {
        "calls": shown,
        "hidden": len(calls) - len(listed),
        "item": item,
        "item_url": item.get_absolute_url(),
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
