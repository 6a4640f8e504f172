"""The start of each item's text that a timeline shows, and the query that loads only that.

A page of the timeline never reads an item's whole text or output: the database sends the
first characters of it (`body_head`) and its size in bytes (`body_bytes`), and `preview`
cuts that start to at most PREVIEW_BYTES of escaped UTF-8 (a '€' is 3 bytes, a '<' becomes
`&lt;`, a `[blob:<id>]` becomes a link); the rest is on the item's own page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import BigIntegerField, Case, Func, Prefetch, QuerySet, TextField, When
from django.db.models.functions import Substr
from django.utils.html import escape

from blobviewer.models import BlobRef, Item, Session
from core.content import utf8_size
from core.store.blob_id import BLOB_REF

# Each item's text gets 1 KB: enough for any promoted output's whole summary (at most 400
# bytes, escaped and linked).
PREVIEW_BYTES = 1000
_BLOB_REF_CHARS = len("[blob:00000000-0000-0000-0000-000000000000]")
# What a `[blob:<id>]` link adds around its text (class, href, hx-get, hx-target, hx-swap,
# and for a blob missing from the store its title).
_LINK_MARKUP = 240
# Every character is at least one byte, so this many characters fill any preview, and a
# `[blob:<id>]` that the preview's end cuts in two can still be shown whole.
_HEAD_CHARS = PREVIEW_BYTES + _BLOB_REF_CHARS


class Utf8Length(Func):
    """The size of a text column in UTF-8 bytes, computed by the database."""

    function = "OCTET_LENGTH"
    output_field = BigIntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # SQLite's LENGTH counts characters in a text, bytes in a blob.
        return self.as_sql(
            compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra
        )


def timeline_items(session: Session) -> QuerySet[Item]:
    """The session's items with `body_head`, the start of the text a timeline shows (the
    output of a tool result, the text of a message), and `body_bytes`, its whole size;
    `text` and `output` themselves stay in the database."""
    is_result = When(type=Item.Type.TOOL_RESULT, then=Substr("output", 1, _HEAD_CHARS))
    result_size = When(type=Item.Type.TOOL_RESULT, then=Utf8Length("output"))
    return (
        session.items.defer("text", "output")
        .annotate(
            body_head=Case(
                is_result, default=Substr("text", 1, _HEAD_CHARS), output_field=TextField()
            ),
            body_bytes=Case(result_size, default=Utf8Length("text")),
        )
        .prefetch_related(item_blob_refs())
    )


def item_blob_refs() -> Prefetch:
    """Items' blob references with their blobs, for the links (and whether each is missing)."""
    refs = BlobRef.objects.select_related("blob")
    return Prefetch("blob_refs", queryset=refs)


@dataclass(frozen=True, slots=True)
class Preview:
    text: str
    more_bytes: int  # UTF-8 bytes of the whole text that *text* leaves out


def preview(head: str, whole_bytes: int, *, budget: int = PREVIEW_BYTES) -> Preview:
    """The start of a text (*head*, of a text *whole_bytes* long) that renders to at most
    about *budget* bytes, escaped and with its blob links; a `[blob:<id>]` the cut would
    split is kept whole, so it stays a link."""
    shown = head
    cost = _rendered_size(shown)
    while cost > budget:  # shrinks every time; a few rounds at most
        shown = shown[: len(shown) * budget // cost]
        cost = _rendered_size(shown)
    if len(shown) < len(head):
        window = max(0, len(shown) - _BLOB_REF_CHARS)
        for match in BLOB_REF.finditer(head, window, len(shown) + _BLOB_REF_CHARS):
            if match.start() < len(shown) < match.end():
                shown = head[: match.end()]
    return Preview(shown, max(0, whole_bytes - utf8_size(shown)))


def _rendered_size(text: str) -> int:
    return len(escape(text).encode("utf-8", "surrogatepass")) + _LINK_MARKUP * text.count("[blob:")
