"""Where a blob came from: the step that made it, the steps that refer to it, its preview.

A blob is *made by* the tool result whose output begins with its `[blob:<id>]` and whose
tool is not `inspect` (an inspect result begins the same way, but it is what the model
read of a blob, never a promoted output). Every other item that mentions the blob *refers
to* it. Importers keep their own words about a step in `Item.note`, never in the output,
so the rule holds for every recording.

What a page needs is written once, when the blob or its session comes in, so no page
looks for calls or reads blob files to say it:

- `Blob.made_by` and `Blob.made_by_title` (the maker's call in one line, through the
  shared argument helper `tool_args.one_line`: `Read src/app.py`, `bash: pytest -x`),
  by `link_made_by` when ingest writes items (a rebuild re-creates its items, which
  unlinks their blobs for a moment; the same call links them again);
- `Blob.preview`, the content's first line, by `read_preview` when a blob is indexed.

`blob_provenance` then reads what a blob page shows in two small queries.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models.functions import Substr
from django.urls import reverse

from blobviewer.models import Blob, BlobRef, Item, Session
from blobviewer.templatetags.terminal import strip_terminal_codes
from blobviewer.timeline.pages import step_url
from blobviewer.timeline.tool_args import one_line
from core.store import BlobReader
from core.store.blob_id import BLOB_REF

INSPECT = "inspect"
# A stored preview is at most this many characters (plus "…"): one line of a list row.
PREVIEW_CHARS = 160
# How much of a blob's file is read for its preview. A text whose first non-blank line
# starts further in has no preview; nothing more is read to find one.
PREVIEW_READ_BYTES = 8192
TITLE_CHARS = 200  # Blob.made_by_title's length
# The steps that refer to a blob which its page lists; the rest are counted.
REFERENCES_SHOWN = 20
# A call is looked for among this many assistant items before its result, newest first,
# when it was not among the items ingested with the result.
CALL_LOOK_BACK = 200
# What an inspect result's first line says after its `[blob:<id>] ` (e.g. `lines 2-3 of 300`).
_DETAIL_CHARS = 120
_HEAD_CHARS = 300

# Characters a one-line preview or title cannot hold: C0 controls (a tab reads as a
# space), DEL, C1 controls, and lone surrogates, which no database column takes.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


# --- the rule --------------------------------------------------------------------------------


def made_blob(item_type: str, tool: str, output: str) -> uuid.UUID | None:
    """The blob a tool result made: the id its output begins with (`[blob:<id>]`), unless
    the tool is `inspect`; None for every other item."""
    if item_type != Item.Type.TOOL_RESULT or tool == INSPECT:
        return None
    match = BLOB_REF.match(output)
    return uuid.UUID(match.group(1)) if match else None


def step_title(tool: str, arguments: Any) -> str:
    """A maker's call in one line (`Read src/app.py`), as Blob.made_by_title stores it."""
    return one_line_text(one_line(tool, arguments))[:TITLE_CHARS]


def one_line_text(text: str) -> str:
    """*text* as a database column and one line of a page can hold it: without terminal
    codes and control characters (a tab is a space), lone surrogates replaced."""
    text = strip_terminal_codes(text).replace("\t", " ")
    text = _CONTROL.sub("", text)
    return _SURROGATE.sub("\ufffd", text).strip()


# --- previews --------------------------------------------------------------------------------


def read_preview(blob: BlobReader) -> str:
    """The first line of the blob *blob* reads that has something to read, cut to
    PREVIEW_CHARS (a JSON blob: the start of its compact text, which is one line).

    Reads at most PREVIEW_READ_BYTES; "" when that holds no such line or the blob cannot
    be read (the blob's other facts say why).
    """
    try:
        head = blob.read(0, PREVIEW_READ_BYTES)
    except OSError:
        return ""
    return preview_of(head, blob.kind)


def preview_of(head: bytes, kind: str) -> str:
    """read_preview of a blob of *kind* (`text` or `json`) whose first PREVIEW_READ_BYTES
    bytes (or all, when it is shorter) are *head*."""
    # A character cut at the end of the read becomes U+FFFD; it is past any line shown.
    text = head.decode("utf-8", errors="replace")
    if kind == "json":
        lines: Iterable[str] = [text.replace("\n", " ")]
    else:
        lines = text.split("\n")
    for line in lines:
        shown = _line_start(line)
        if shown:
            return shown if len(shown) <= PREVIEW_CHARS else shown[: PREVIEW_CHARS - 1] + "…"
    return ""


# How much of a long line preview_of cleans first: far more than PREVIEW_CHARS, far less
# than a one-line JSON blob's PREVIEW_READ_BYTES.
_PREVIEW_SCAN = 1024


def _line_start(line: str) -> str:
    """one_line_text(line), or, for a long line, a text of more than PREVIEW_CHARS that
    it starts with. Without terminal codes every character is cleaned on its own, so the
    start of a line, cleaned, is the start of the line cleaned."""
    if len(line) > _PREVIEW_SCAN and "\x1b" not in line:
        start = one_line_text(line[:_PREVIEW_SCAN])
        if len(start) > PREVIEW_CHARS:
            return start
    return one_line_text(line)


# --- linking makers at ingest ------------------------------------------------------------------


def link_made_by(session: Session, items: Sequence[Item]) -> int:
    """Link each blob that one of *items* (just written, of *session*) made to its maker,
    with the maker's title, unless the blob already names a maker that still exists (the
    first session to make a blob keeps it). Returns how many blobs were linked.

    A maker's call is looked for among *items* first (calls and results usually arrive
    together), then among the CALL_LOOK_BACK assistant items recorded before it; a maker
    whose call is nowhere is titled with its tool's name. *items* may also be rows that
    are not Item instances but have their fields (and `pk`), as ingest writes them.
    """
    makers = _makers(items)
    if not makers:
        return 0
    unlinked: list[uuid.UUID] = []
    ids = list(makers)
    for start in range(0, len(ids), 500):
        unlinked += Blob.objects.filter(
            id__in=ids[start : start + 500], made_by__isnull=True
        ).values_list("id", flat=True)
    if not unlinked:
        return 0
    linked = 0
    for blob_id, (maker, title) in made_by_titles(session, items, unlinked).items():
        # The guard again, in the UPDATE: a concurrent ingest may have linked it since.
        linked += Blob.objects.filter(id=blob_id, made_by__isnull=True).update(
            made_by_id=maker.pk, made_by_title=title
        )
    return linked


def made_by_titles(
    session: Session, items: Sequence[Item], blob_ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[Item, str]]:
    """Blob id -> (maker, title) for each of *blob_ids* that one of *items* made, as
    link_made_by links it, without looking at what the blobs' rows say (for rows about to
    be written: ingest fills in a new blob's maker before it inserts the row)."""
    makers = _makers(items)
    wanted = [blob_id for blob_id in blob_ids if blob_id in makers]
    if not wanted:
        return {}
    calls = _calls(session, [makers[blob_id] for blob_id in wanted], items)
    titles = {}
    for blob_id in wanted:
        maker = makers[blob_id]
        name, arguments = calls.get(maker.call_id, (maker.tool, None))
        # The title its importer gave the step (a Codex poll's), else its call in one line.
        title = one_line_text(maker.title)[:TITLE_CHARS] or step_title(
            name or maker.tool, arguments
        )
        titles[blob_id] = (maker, title)
    return titles


def _makers(items: Sequence[Item]) -> dict[uuid.UUID, Item]:
    """Blob id -> the first of *items* (by seq) that made it."""
    makers: dict[uuid.UUID, Item] = {}
    for item in sorted(items, key=lambda item: item.seq):
        blob_id = made_blob(item.type, item.tool, item.output)
        if blob_id is not None:
            makers.setdefault(blob_id, item)
    return makers


def calls_in(tool_calls: Any) -> Iterable[tuple[str, str, Any]]:
    """(id, name, arguments) of each call an assistant item's `tool_calls` records."""
    if not isinstance(tool_calls, list):
        return
    for call in tool_calls:
        if isinstance(call, dict) and isinstance(call.get("id"), str) and call["id"]:
            name = call.get("name")
            yield call["id"], name if isinstance(name, str) else "", call.get("arguments")


def _calls(
    session: Session, makers: Sequence[Item], items: Sequence[Item]
) -> dict[str, tuple[str, Any]]:
    """Call id -> (tool name, arguments) for the calls of *makers* that can be found."""
    wanted = {maker.call_id for maker in makers if maker.call_id}
    found: dict[str, tuple[str, Any]] = {}
    for item in items:
        if item.type == Item.Type.ASSISTANT:
            for call_id, name, arguments in calls_in(item.tool_calls):
                if call_id in wanted:
                    found.setdefault(call_id, (name, arguments))
    missing = wanted - found.keys()
    if missing:
        latest = max(maker.seq for maker in makers)
        written = [item.pk for item in items if item.pk is not None]
        older = (
            Item.objects.filter(session=session, type=Item.Type.ASSISTANT, seq__lt=latest)
            .exclude(pk__in=written)
            .order_by("-seq")
            .values_list("tool_calls", flat=True)[:CALL_LOOK_BACK]
        )
        for tool_calls in older.iterator(chunk_size=50):
            for call_id, name, arguments in calls_in(tool_calls):
                if call_id in missing:
                    found[call_id] = (name, arguments)
                    missing.discard(call_id)
            if not missing:
                break
    return found


# --- what a page shows -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRef:
    """A step of a session, as a blob page names it."""

    session_id: uuid.UUID
    session_title: str
    seq: int
    at: datetime | None  # when the recording says it happened; None: it has no times

    @property
    def item_url(self) -> str:
        """`/sessions/<id>/items/<seq>/`: the item whole, which links to its timeline step."""
        return reverse("item_detail", args=[self.session_id, self.seq])

    @property
    def session_label(self) -> str:
        return self.session_title or "(untitled session)"


@dataclass(frozen=True, slots=True)
class Reference:
    """An item that refers to a blob without having made it."""

    step: StepRef
    label: str  # `inspect`, the tool's name, `assistant message`, `user message`
    detail: str  # an inspect result's first line, less its `[blob:<id>]`; else ""
    is_error: bool


@dataclass(frozen=True, slots=True)
class Provenance:
    """What made a blob and what refers to it. *title* is the maker's call in one line
    ("" when no step made the blob: its page keeps the id as its title)."""

    title: str
    maker: StepRef | None
    references: tuple[Reference, ...]
    reference_count: int  # all of them; `references` holds the first few

    @property
    def more_references(self) -> int:
        return self.reference_count - len(self.references)


def blob_provenance(blob: Blob, *, references: int = REFERENCES_SHOWN) -> Provenance:
    """*blob*'s maker and the first *references* steps that refer to it, in the order
    they were recorded (0: only the maker, e.g. for a share page, which shows nothing
    else of the session). Reads the database only; an unsaved Blob (one the store has
    and the database does not know yet) has neither."""
    maker = _maker(blob.made_by_id) if blob.made_by_id else None
    if not references or blob._state.adding:
        return Provenance(blob.made_by_title if maker else "", maker, (), 0)
    refs = BlobRef.objects.filter(blob_id=blob.id)
    if blob.made_by_id:
        refs = refs.exclude(item_id=blob.made_by_id)
    rows = (
        refs.order_by("session__created_at", "session_id", "item__seq")
        .annotate(head=Substr("item__output", 1, _HEAD_CHARS))
        .values_list(
            "session_id",
            "session__title",
            "item__seq",
            "item__at",
            "item__type",
            "item__tool",
            "item__is_error",
            "head",
        )[:references]
    )
    shown = tuple(
        Reference(
            StepRef(session_id, title, seq, at),
            _label(kind, tool),
            _detail(blob.id, head) if kind == Item.Type.TOOL_RESULT and tool == INSPECT else "",
            is_error,
        )
        for session_id, title, seq, at, kind, tool, is_error, head in rows
    )
    count = len(shown) if len(shown) < references else refs.count()
    return Provenance(blob.made_by_title if maker else "", maker, shown, count)


def _maker(item_id: int) -> StepRef | None:
    row = (
        Item.objects.filter(pk=item_id)
        .values_list("session_id", "session__title", "seq", "at")
        .first()
    )
    return StepRef(*row) if row else None


def _label(kind: str, tool: str) -> str:
    if kind == Item.Type.TOOL_RESULT:
        return tool or "tool result"
    return f"{kind} message"


def _detail(blob_id: uuid.UUID, head: str | None) -> str:
    """What an inspect result read, from its header line (`lines 2-3 of 300`)."""
    first = (head or "").split("\n", 1)[0]
    prefix = f"[blob:{blob_id}]"
    if first.lower().startswith(prefix):
        first = first[len(prefix) :]
    first = one_line_text(first)
    return first if len(first) <= _DETAIL_CHARS else first[: _DETAIL_CHARS - 1] + "…"


def timeline_url(step: StepRef) -> str:
    """Where the timeline shows *step* (its page, `#step-<seq>`); the item's own page when
    the session is gone."""
    session = Session.objects.filter(id=step.session_id).first()
    return step_url(session, step.seq) if session is not None else step.item_url
