"""Template helpers of the session timeline: an item's text or output (its start, or whole)
with blob links, long system prompts folded, and the words for durations and sizes.

Nothing here marks content safe: texts are cut into segments that the templates escape.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template

from blobviewer.models import Item, Session
from blobviewer.templatetags.blob_links import blob_segments
from blobviewer.timeline.cost import CostShown, session_cost_shown, turn_cost_shown
from blobviewer.timeline.previews import Preview, preview
from blobviewer.timeline.steps import Unit

register = template.Library()

# A message of one of these roles is not the user talking (SWE-agent's demonstrations,
# system prompts): past COLLAPSED_LINES lines, the rest of it starts folded away.
COLLAPSED_ROLES = frozenset({"system", "demonstration", "developer", "meta", "instance_template"})
COLLAPSED_LINES = 4


def _shown(item: Item, whole: bool) -> Preview:
    if whole:
        return Preview(item.output if item.type == Item.Type.TOOL_RESULT else item.text, 0)
    return preview(item.body_head or "", item.body_bytes or 0)


@register.inclusion_tag("_item_text.html")
def item_text(item: Item, *, whole: bool = False, fold: bool = True) -> dict[str, Any]:
    """An item's text (a tool result's output), or on the timeline its start and a link
    to the rest. A message that is not the user or the model talking (a system prompt, a
    demonstration) shows its first COLLAPSED_LINES lines, the rest folded in a
    `<details>` (when *fold*)."""
    shown = _shown(item, whole)
    blobs = {ref.blob_id: ref.blob for ref in item.blob_refs.all()}
    head, rest, folded_lines = shown.text, "", 0
    if fold and item.role in COLLAPSED_ROLES:
        lines = shown.text.split("\n")
        if len(lines) > COLLAPSED_LINES + 1:
            head = "\n".join(lines[:COLLAPSED_LINES]) + "\n"
            rest = "\n".join(lines[COLLAPSED_LINES:])
            folded_lines = len(lines) - COLLAPSED_LINES
    return {
        "item": item,
        "segments": blob_segments(head, blobs),
        "rest": blob_segments(rest, blobs) if rest else [],
        "folded_lines": folded_lines,
        "more_bytes": shown.more_bytes,
        "is_result": item.type == Item.Type.TOOL_RESULT,
        "target": f"item-{item.seq}-blob",
        "item_url": item.get_absolute_url(),
        "empty": not shown.text,
    }


@register.filter
def duration_text(value: timedelta | None) -> str:
    """`850 ms`, `4.2 s`, `42 s`, `4 min 05 s`, `2 h 03 min`, `3 d 4 h`; "" when not recorded."""
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


@register.filter
def nbytes(value: int | None) -> str:
    """An exact byte count for reading: `12,345 B`."""
    return f"{value or 0:,} B"


@register.filter
def tokens_text(value: int | None) -> str:
    return "" if value is None else f"{value:,}"


@register.simple_tag
def turn_dollars(unit: Unit, session: Session) -> CostShown:
    """What a turn cost, priced at the session's model as of its start (docs/cost.md)."""
    return turn_cost_shown(session.model, unit.usages, at=session.started_at)


@register.simple_tag
def session_dollars(session: Session) -> CostShown:
    """What a session cost, as its facts and the session list show it."""
    return session_cost_shown(session.cost_usd, session.unpriced_turns, session.model)
