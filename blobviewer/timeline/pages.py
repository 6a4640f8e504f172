"""A session's timeline: its steps laid out in byte-bounded pages, and one page of them
ready for the template.

A page is computed from a skeleton of the session (blobviewer.timeline.steps: each item's kind,
call ids, sizes, flags — never its text or output), so laying out a 10,000-step session
costs a few small queries. Only the items on the page are then loaded, and of those only
the start of each text or output (`body_head`), shown as at most PREVIEW_BYTES of escaped
UTF-8 (a '€' is 3 bytes, a '<' becomes `&lt;`); the rest is on the item's own page.

Every part of a step the page shows is cut to a known size (arguments, output, tool name,
importer note), so the layout can add up an upper bound of each step's HTML and keep a
page under TIMELINE_BUDGET whatever the filter; the outline and the chart are bounded
too, so the whole page stays under the 200 KB the SPEC allows.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

from django.db import connections
from django.db.models import (
    BigIntegerField,
    Case,
    Count,
    Func,
    Max,
    Prefetch,
    QuerySet,
    TextField,
    When,
)
from django.db.models.functions import Substr
from django.http import QueryDict
from django.urls import reverse
from django.utils.html import escape

from blobviewer.models import BlobRef, Item, Session
from blobviewer.timeline.steps import (
    ASSISTANT,
    TOOL_CHARS,
    CallRow,
    ItemRow,
    Layout,
    Mark,
    Piece,
    Step,
    StepFilter,
    Unit,
    all_steps,
    biggest_steps,
    build_units,
    outline_marks,
    paginate,
)
from blobviewer.timeline.token_chart import TokenChart, token_chart
from blobviewer.timeline.tool_args import (
    ArgsView,
    arguments_view,
    html_size,
    one_line,
    parse_arguments,
)
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

# --- the page budget --------------------------------------------------------------------
# The SPEC's limit is 200 KB a page. The header, filters, chart and outline are bounded
# by their own limits (OUTLINE_MARKS, BIGGEST_SHOWN, TOOLS_LISTED, token_chart's); the
# steps and messages of a page share TIMELINE_BUDGET.
PAGE_LIMIT = 200 * 1024
TIMELINE_BUDGET = 110_000
ARGS_BYTES = 600  # a step's arguments as the timeline shows them, escaped
NOTE_CHARS = 200  # an importer's note on a result (the template cuts it to this)
NAME_CHARS = 80  # tool names, call ids and roles are cut to this on the timeline
OUTLINE_MARKS = 400
OUTLINE_BYTES = 36_000  # the outline's marks; fewer marks (each for a run of steps) past it
BIGGEST_SHOWN = 20
TITLE_CHARS = 100  # a step's one-line title in the "biggest outputs" list
PATH_CHARS = 36  # ...whose paths keep their last components
LABEL_CHARS = 40  # a tool's name in the labels of outline and chart marks
CHART_MARKS_BYTES = 16_000
META_BYTES = 4_000  # a session's meta, as `key: value` lines in the header
TOOLS_LISTED = 60
TOOLS_BYTES = 8_000
READERS_SHOWN = 3  # links to later inspect calls of a step's blob
# An inspect call's link to the reader carries its selector only when it is short.
READER_SELECTOR_BYTES = 300
READER_URL_BYTES = READER_SELECTOR_BYTES + 80
# Upper bounds of the markup around the parts (measured on the templates with the longest
# names, ids and numbers, plus a margin; tests/web/timeline/test_timeline_steps.py checks a page of
# worst cases against PAGE_LIMIT under every filter).
STEP_MARKUP = 1_800
TURN_MARKUP = 900
ITEM_ANCHOR = 40
TEXT_MARKUP = 600
MESSAGE_MARKUP = 1_100
CONTINUED_MARKUP = 700
TURN_TEXTS_SHOWN = 3
# A message of one of these roles is not the user talking (SWE-agent's demonstrations,
# system prompts): past COLLAPSED_LINES lines, the rest of it starts folded away.
COLLAPSED_ROLES = frozenset({"system", "demonstration", "developer", "meta", "instance_template"})
COLLAPSED_LINES = 4


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


# --- the skeleton --------------------------------------------------------------------------


@dataclass(frozen=True)
class Skeleton:
    """Every item of a session as an ItemRow, and which blobs each item references."""

    rows: list[ItemRow]
    blobs_of: dict[int, list[uuid.UUID]]  # item pk -> the blobs it references, in order


def load_skeleton(session: Session) -> Skeleton:
    """Three queries, whatever the session's size: the items' small columns, their calls
    (ids and names, read inside the database from the JSON), and their blob references."""
    blobs_of: dict[int, list[uuid.UUID]] = {}
    for item_pk, blob_id in BlobRef.objects.filter(session=session).values_list(
        "item_id", "blob_id"
    ):
        blobs_of.setdefault(item_pk, []).append(blob_id)
    calls = _calls_of(session)
    connection = connections[Item.objects.db]
    # Plain SQL that both databases read alike: a long session has tens of thousands of
    # rows, and the ORM's per-value converters would cost more than the query.
    sql = _ITEMS_SQL.format(table=connection.ops.quote_name(Item._meta.db_table))
    with connection.cursor() as cursor:
        cursor.execute(sql, [_session_value(session, connection)])
        values = cursor.fetchall()
    no_calls: tuple[CallRow, ...] = ()
    rows = [
        ItemRow(
            seq,
            kind,
            pk,
            call_id,
            tool,
            bool(is_error),
            received,
            output,
            chars or 0,
            note_chars or 0,
            role,
            bool(sidechain),
            pk in blobs_of,
            input_tokens,
            output_tokens,
            context_tokens,
            calls.get(pk, no_calls),
        )
        for (
            pk,
            seq,
            kind,
            call_id,
            tool,
            is_error,
            received,
            output,
            chars,
            note_chars,
            role,
            sidechain,
            input_tokens,
            output_tokens,
            context_tokens,
        ) in values
    ]
    return Skeleton(rows, blobs_of)


_ITEMS_SQL = """
    SELECT id, seq, type, call_id, tool, is_error, received_bytes, output_bytes,
           CASE WHEN type = 'tool_result' THEN 0 ELSE LENGTH(text) END, LENGTH(note),
           role, sidechain, input_tokens, output_tokens, context_tokens
    FROM {table} WHERE session_id = %s ORDER BY seq
"""


def _session_value(session: Session, connection: Any) -> Any:
    return Item._meta.get_field("session").get_db_prep_value(session.pk, connection)


_CALLS_SQL = {
    # Only ids and names leave the database (and an inspect call's small arguments): an
    # assistant item's arguments may hold whole files.
    "sqlite": """
        SELECT i.id, j.key,
               CASE WHEN j.type = 'object' THEN json_extract(j.value, '$.id') END,
               CASE WHEN j.type = 'object' THEN json_extract(j.value, '$.name') END,
               CASE WHEN j.type = 'object' AND json_extract(j.value, '$.name') = 'inspect'
                    THEN json_extract(j.value, '$.arguments') END
        FROM {table} i, json_each(i.tool_calls) j
        WHERE i.session_id = %s AND i.type = 'assistant' AND json_type(i.tool_calls) = 'array'
        ORDER BY i.id, j.key
    """,
    "postgresql": """
        SELECT i.id, j.ord - 1, j.value ->> 'id', j.value ->> 'name',
               CASE WHEN j.value ->> 'name' = 'inspect' THEN j.value ->> 'arguments' END
        FROM {table} i CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(i.tool_calls) = 'array' THEN i.tool_calls
                 ELSE '[]'::jsonb END
        ) WITH ORDINALITY AS j(value, ord)
        WHERE i.session_id = %s AND i.type = 'assistant'
        ORDER BY i.id, j.ord
    """,
}


def _calls_of(session: Session) -> dict[int, tuple[CallRow, ...]]:
    """Each assistant item's calls (by item pk), in the order the model made them."""
    connection = connections[Item.objects.db]
    sql = _CALLS_SQL.get(connection.vendor)
    if sql is None:  # another database: read the calls whole, through the ORM
        rows = [
            (pk, index, call.get("id"), call.get("name"), call.get("arguments"))
            for pk, calls in session.items.filter(type=ASSISTANT).values_list("pk", "tool_calls")
            if isinstance(calls, list)
            for index, call in enumerate(calls)
            if isinstance(call, dict)
        ]
    else:
        session_value = _session_value(session, connection)
        with connection.cursor() as cursor:
            cursor.execute(
                sql.format(table=connection.ops.quote_name(Item._meta.db_table)), [session_value]
            )
            rows = cursor.fetchall()
    calls: dict[int, list[CallRow]] = {}
    for pk, index, call_id, name, inspect_arguments in rows:
        calls.setdefault(pk, []).append(
            CallRow(
                index=int(index),
                id=call_id if isinstance(call_id, str) else "",
                name=name if isinstance(name, str) else "",
                inspect_blob=_inspected_blob(inspect_arguments) if name == "inspect" else None,
            )
        )
    return {pk: tuple(rows) for pk, rows in calls.items()}


def _inspected_blob(arguments: Any) -> uuid.UUID | None:
    """The blob id an inspect call's arguments name (a JSON object, or its text)."""
    for _ in range(2):  # text of an object, or text of a string that holds the object
        if not isinstance(arguments, str):
            break
        parsed = parse_arguments(arguments)
        if parsed == arguments:
            break
        arguments = parsed
    if not isinstance(arguments, dict):
        return None
    try:
        return uuid.UUID(str(arguments.get("blob_id", "")).strip())
    except ValueError:
        return None


# --- costs -------------------------------------------------------------------------------


def _text_cost(chars: int) -> int:
    # Escaping makes a character at most 6 bytes (`&quot;`), and blob links add their
    # markup; the preview itself stops at PREVIEW_BYTES plus a blob reference kept whole.
    return min(PREVIEW_BYTES + _BLOB_REF_CHARS + _LINK_MARKUP, 10 * chars)


class _Costs:
    """Upper bounds of the HTML a unit's head and each step render to, for one timeline
    (its links carry its filter's query, so their length is part of the cost)."""

    def __init__(
        self,
        link: int,
        readers: Mapping[uuid.UUID, list[Step]],
        blobs_of: Mapping[int, list[uuid.UUID]],
    ) -> None:
        self.link = link  # the longest link to a step this timeline writes
        self.readers = readers
        self.blobs_of = blobs_of
        self._names: dict[str, int] = {}  # tool name -> its cost, once per name

    def head(self, unit: Unit) -> int:
        if unit.kind == "message":
            item = unit.items[0]
            return MESSAGE_MARKUP + _text_cost(item.text_chars)
        texts = [item for item in unit.items if item.text_chars][:TURN_TEXTS_SHOWN]
        return (
            TURN_MARKUP
            + ITEM_ANCHOR * len(unit.items)
            + sum(TEXT_MARKUP + _text_cost(item.text_chars) for item in texts)
        )

    def step(self, step: Step) -> int:
        tool = step.tool
        name = self._names.get(tool)
        if name is None:
            name = self._names[tool] = 2 * html_size(tool[:NAME_CHARS])
        cost = STEP_MARKUP + ARGS_BYTES + name
        result = step.result
        if result is not None:
            cost += _text_cost(result.output_bytes)
            if result.note_chars:  # shown cut to NOTE_CHARS characters
                cost += 100 + 6 * min(result.note_chars, NOTE_CHARS)
        if step.call is not None and step.call.inspect_blob is not None:
            cost += self.link + 2 * READER_URL_BYTES  # "reads the output of", the reader
        elif result is not None and result.has_blobs:
            readers = sum(len(self.readers.get(b, ())) for b in self.blobs_of.get(result.pk, ()))
            cost += self.link * min(readers, READERS_SHOWN)
        return cost

    def layout(self, units: list[Unit]) -> Layout:
        return paginate(
            units,
            budget=TIMELINE_BUDGET,
            head_cost=self.head,
            step_cost=self.step,
            continued_cost=CONTINUED_MARKUP + self.link,
        )


# --- one page, for the template ------------------------------------------------------------


@dataclass
class ShownStep:
    """A step as the page shows it: its call's arguments, its result item (with the start
    of its output), and the links to related steps."""

    step: Step
    result: Item | None
    call: dict[str, Any] | None
    args: ArgsView | None
    title: str
    href: str
    item_url: str
    call_url: str = ""  # the page of the item that made the call (its arguments whole)
    reads: tuple[Step, str] | None = None  # an inspect call: the step whose blob it reads
    read_by: list[tuple[Step, str]] = field(default_factory=list)  # later inspect calls
    more_readers: int = 0
    reader_url: str = ""  # an inspect call: the blob page at the call's selector
    inspect_selector: str = ""


@dataclass
class ShownUnit:
    piece: Piece
    kind: str
    items: list[Item]  # a message's item, or the turn's assistant items (whole rows)
    texts: list[Item]  # the turn's items with text, as shown
    more_texts: int
    steps: list[ShownStep]
    continued_from: int = 0  # page number where this turn starts, when continued
    continued_href: str = ""
    continues: bool = False
    anchor_seqs: list[int] = field(default_factory=list)  # items shown without their text

    @property
    def item(self) -> Item:
        return self.items[0]

    @property
    def unit(self) -> Unit:
        return self.piece.unit


class Timeline:
    """A session's timeline under a filter: its layout, and links to any step."""

    def __init__(
        self,
        session: Session,
        step_filter: StepFilter,
        *,
        query: Mapping[str, str] | None = None,
        skeleton: Skeleton | None = None,
    ) -> None:
        self.session = session
        self.filter = step_filter
        self.url = reverse("session_detail", args=[session.id])
        self._page_urls: dict[tuple[int, bool], str] = {}
        self.query = _filter_query(step_filter)
        biggest = (query or {}).get("outline") == "biggest"
        if biggest:
            self.query["outline"] = "biggest"
        parsed = _Parsed(skeleton, self.url) if skeleton else _parsed(session, self.url)
        self._parsed = parsed
        self.skeleton = parsed.skeleton
        self.units = parsed.units
        self.steps = parsed.steps
        self._inspections = parsed.inspections
        self.shown_units, self.layout, self.shown_steps = parsed.shown(step_filter)

    @property
    def full_layout(self) -> Layout:
        """The unfiltered timeline's pages (where links to steps a filter hides go)."""
        return self._parsed.shown(StepFilter())[1]

    def page_url(self, number: int, *, filtered: bool = True) -> str:
        """The URL of page *number* under this timeline's filter (or none)."""
        key = (number, filtered)
        url = self._page_urls.get(key)
        if url is None:
            query = self.query.copy() if filtered else QueryDict(mutable=True)
            if number > 1:
                query["page"] = str(number)
            encoded = query.urlencode()
            url = self._page_urls[key] = f"{self.url}?{encoded}" if encoded else self.url
        return url

    def href(self, step: Step, *, current: int | None = None) -> str:
        """A link to *step*: `#anchor` on the current page; else its page under this
        filter; else (the filter hides it) its page on the unfiltered timeline."""
        page = self.layout.page_of_anchor.get(step.anchor)
        if page is not None:
            if page == current:
                return f"#{step.anchor}"
            return f"{self.page_url(page)}#{step.anchor}"
        page = self.full_layout.page_of_anchor.get(step.anchor, 1)
        return f"{self.page_url(page, filtered=False)}#{step.anchor}"

    def item_href(self, seq: int) -> str:
        """Where an item is on the unfiltered timeline: its step, or `#item-<seq>`."""
        step = self.step_of_result(seq)
        if step is not None:
            return self.href(step)
        page = self.full_layout.page_of_item.get(seq)
        if page is None:  # an item no unit shows (cannot happen today): the first page
            return f"{self.page_url(1, filtered=False)}#item-{seq}"
        return f"{self.page_url(page, filtered=False)}#item-{seq}"

    @property
    def tools(self) -> list[tuple[str, int]]:
        """The tools this session called, most used first (the chosen one first of all),
        with their step counts; as many as fit TOOLS_BYTES."""
        ranked = self._parsed.tool_counts
        if self.filter.tool:
            counts = dict(ranked)
            chosen = (self.filter.tool, counts.get(self.filter.tool, 0))
            ranked = [chosen, *(pair for pair in ranked if pair[0] != self.filter.tool)]
        listed, spent = [], 0
        for name, count in ranked:
            # Each name is written twice (value and label); a filter value is at most
            # StepFilter's length, so longer names could not be chosen anyway.
            spent += 2 * html_size(name) + 40
            if len(listed) == TOOLS_LISTED or spent > TOOLS_BYTES or len(name) > TOOL_CHARS:
                continue
            listed.append((name, count))
        return listed

    @property
    def counts(self) -> dict[str, int]:
        return {**self._parsed.counts, "shown": len(self.shown_steps)}

    def chart(self, current: int) -> dict[str, Any] | None:
        """The chart of context tokens per turn, and its marks with their links from page
        *current*; None when no turn recorded its tokens."""
        chart = self._parsed.chart
        if chart is None:
            return None
        # The chart is of the whole session: its marks go to the unfiltered pages (but for
        # a step on the page on screen), so their links are as long as the chart allows.
        marks = []
        for mark in chart.marks:
            anchor = mark.step.anchor
            if self.layout.page_of_anchor.get(anchor) == current:
                marks.append((mark, f"#{anchor}"))
            else:
                page = self.full_layout.page_of_anchor.get(anchor, 1)
                marks.append((mark, f"{self.page_url(page, filtered=False)}#{anchor}"))
        return {"chart": chart, "marks": marks}

    def outline(self, current: int, *, biggest: bool) -> dict[str, Any]:
        steps = self.shown_steps
        if biggest:
            ranked = biggest_steps(steps, limit=BIGGEST_SHOWN)
            titles = _titles(self.session, ranked)
            rows = [
                (step, self.href(step, current=current), titles[step.anchor]) for step in ranked
            ]
            return {"biggest": rows, "marks": [], "per_mark": 1}
        marks = self._parsed.marks(self.filter, self.layout)
        page_of = self.layout.page_of_anchor
        shown = [
            (
                mark,
                self.href(mark.step, current=current),
                label,
                page_of.get(mark.anchor) == current,
            )
            for mark, label in marks
        ]
        return {"biggest": [], "marks": shown, "per_mark": marks[0][0].count if marks else 1}

    def page(self, number: int) -> list[ShownUnit]:
        """The units of page *number* (1-based, within range), with their items loaded."""
        pieces = self.layout.page(number)
        seqs: set[int] = set()
        for piece in pieces:
            if not piece.continued:
                seqs.update(item.seq for item in piece.unit.items)
            for step in piece.steps:
                if step.result is not None:
                    seqs.add(step.result.seq)
                if step.assistant is not None:
                    seqs.add(step.assistant.seq)
        items = {item.seq: item for item in timeline_items(self.session).filter(seq__in=seqs)}
        shown: list[ShownUnit] = []
        for piece in pieces:
            unit = piece.unit
            rows = [items[row.seq] for row in unit.items if row.seq in items]
            with_text = [item for item in rows if item.body_bytes] if not piece.continued else []
            steps = [self.shown_step(step, items, current=number) for step in piece.steps]
            continued_from, continued_href = 0, ""
            if piece.continued and unit.steps:
                continued_from = self.layout.page_of_anchor[unit.steps[0].anchor]
                continued_href = f"{self.page_url(continued_from)}#turn-{unit.first_seq}"
            texts = with_text[:TURN_TEXTS_SHOWN]
            shown.append(
                ShownUnit(
                    piece=piece,
                    kind=unit.kind,
                    items=rows,
                    texts=texts,
                    more_texts=max(0, len(with_text) - TURN_TEXTS_SHOWN),
                    steps=steps,
                    continued_from=continued_from,
                    continued_href=continued_href,
                    anchor_seqs=[]
                    if piece.continued or unit.kind == "message"
                    else [item.seq for item in rows if item not in texts],
                    continues=piece.continues,
                )
            )
        return shown

    def step_of_result(self, seq: int) -> Step | None:
        return self._parsed.by_result.get(seq)

    def shown_step(
        self,
        step: Step,
        items: Mapping[int, Item],
        *,
        current: int | None = None,
        args_budget: int | None = ARGS_BYTES,
    ) -> ShownStep:
        """*step* ready for the template, from its loaded *items* (its result and the
        item that made the call, by seq); arguments cut to *args_budget* (None: whole)."""
        inspections = self._inspections
        result = items.get(step.result.seq) if step.result is not None else None
        assistant = items.get(step.assistant.seq) if step.assistant is not None else None
        call = None
        if assistant is not None and step.call is not None:
            calls = assistant.tool_calls if isinstance(assistant.tool_calls, list) else []
            if step.call.index < len(calls) and isinstance(calls[step.call.index], dict):
                call = calls[step.call.index]
        arguments = call.get("arguments") if call else None
        tool = step.tool[:NAME_CHARS]
        args = arguments_view(step.tool, arguments, budget=args_budget) if call else None
        item_url = (result or assistant).get_absolute_url() if (result or assistant) else ""
        shown = ShownStep(
            step=step,
            result=result,
            call=call,
            args=args,
            title=tool,
            href=self.href(step, current=current),
            item_url=item_url,
            call_url=assistant.get_absolute_url() if assistant is not None else "",
        )
        blob = step.call.inspect_blob if step.call is not None else None
        if blob is not None:
            producer = inspections.producer.get(blob)
            if producer is not None and producer.seq < step.seq:
                shown.reads = (producer, self.href(producer, current=current))
            shown.reader_url = reverse("blob_detail", args=[blob])
            selector = _selector(arguments)
            shown.inspect_selector = selector
            encoded = QueryDict.fromkeys(["selector"], selector).urlencode() if selector else ""
            if encoded and len(encoded) <= READER_SELECTOR_BYTES:
                shown.reader_url += "?" + encoded
        elif step.result is not None:
            later: list[Step] = []
            for blob_id in self.skeleton.blobs_of.get(step.result.pk, ()):
                later += [
                    r
                    for r in inspections.readers.get(blob_id, ())
                    if r.seq > step.seq and r not in later
                ]
            shown.read_by = [(r, self.href(r, current=current)) for r in later[:READERS_SHOWN]]
            shown.more_readers = max(0, len(later) - READERS_SHOWN)
        return shown


@dataclass(frozen=True)
class _Inspections:
    producer: dict[uuid.UUID, Step]  # blob -> the step whose output it holds
    readers: dict[uuid.UUID, list[Step]]  # blob -> the inspect calls that read it


def _inspections(steps: list[Step], blobs_of: Mapping[int, list[uuid.UUID]]) -> _Inspections:
    producer: dict[uuid.UUID, Step] = {}
    readers: dict[uuid.UUID, list[Step]] = {}
    for step in steps:
        if step.call is not None and step.call.inspect_blob is not None:
            readers.setdefault(step.call.inspect_blob, []).append(step)
        elif step.result is not None and step.result.has_blobs and step.tool != "inspect":
            for blob_id in blobs_of.get(step.result.pk, ()):
                producer.setdefault(blob_id, step)
    return _Inspections(producer, readers)


class _Parsed:
    """A session's skeleton grouped into units and steps, and the layouts of the filters
    asked for so far. Shared by the requests that view the same state of a session (see
    _parsed), and read-only once made, but for the layouts it adds under its lock."""

    def __init__(self, skeleton: Skeleton, url: str) -> None:
        self.skeleton = skeleton
        self.url = url
        self.units = build_units(skeleton.rows)
        self.steps = all_steps(self.units)
        self.by_result = {s.result.seq: s for s in self.steps if s.result is not None}
        self.inspections = _inspections(self.steps, skeleton.blobs_of)
        self._shown: dict[StepFilter, tuple[list[Unit], Layout, list[Step]]] = {}
        self._marks: dict[StepFilter, list[tuple[Mark, str]]] = {}
        self._lock = threading.Lock()

    @cached_property
    def counts(self) -> dict[str, int]:
        steps = self.steps
        return {
            "steps": len(steps),
            "errors": sum(1 for s in steps if s.is_error),
            "with_blobs": sum(1 for s in steps if s.has_blobs),
            "promoted": sum(1 for s in steps if s.promoted),
            "unanswered": sum(1 for s in steps if s.result is None),
            "turns": sum(1 for u in self.units if u.kind == "turn" and u.items),
        }

    @cached_property
    def tool_counts(self) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for step in self.steps:
            if step.tool:
                counts[step.tool] = counts.get(step.tool, 0) + 1
        return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))

    @cached_property
    def chart(self) -> TokenChart | None:
        link = self._costs(StepFilter()).link  # marks link to the unfiltered pages
        return token_chart(self.units, label=_label, marks_bytes=CHART_MARKS_BYTES, link=link)

    def marks(self, step_filter: StepFilter, layout: Layout) -> list[tuple[Mark, str]]:
        """The outline's marks under the filter with their labels: one per step, or fewer
        (each for a run of steps) so that they fit OUTLINE_BYTES with the longest links."""
        with self._lock:
            found = self._marks.get(step_filter)
        if found is not None:
            return found
        steps = self.shown(step_filter)[2]
        link = self._costs(step_filter).link
        limit = OUTLINE_MARKS
        while True:
            labelled = [(mark, _mark_label(mark)) for mark in outline_marks(steps, limit=limit)]
            # `<a class="m s1 e here" href="…" title="…"></a>`: 45 bytes and the two values.
            size = sum(45 + link + html_size(label) for _, label in labelled)
            if size <= OUTLINE_BYTES or limit <= 10:
                break
            limit = max(10, limit * OUTLINE_BYTES // size - 1)  # fewer marks, a run each
        with self._lock:
            self._marks[step_filter] = labelled
        return labelled

    def shown(self, step_filter: StepFilter) -> tuple[list[Unit], Layout, list[Step]]:
        """The units, pages and steps the filter shows."""
        with self._lock:
            found = self._shown.get(step_filter)
        if found is None:
            units = step_filter.apply(self.units)
            found = (units, self._costs(step_filter).layout(units), all_steps(units))
            with self._lock:
                self._shown[step_filter] = found
        return found

    def _costs(self, step_filter: StepFilter) -> _Costs:
        # The longest link to a step: a page number of six digits, the outline switch on
        # (so switching it never moves a step to another page), the longest anchor.
        query = _filter_query(step_filter)
        query.update({"outline": "biggest", "page": "999999"})
        link = len(escape(f"{self.url}?{query.urlencode()}#call-9999999999-9999")) + 30
        return _Costs(link, self.inspections.readers, self.skeleton.blobs_of)


# The last few sessions' parsed skeletons, in this process: paging through a long session
# then reads its items' small columns once, not on every page. An entry is used only while
# the session is as it was: ingest, a rebuild and late blobs all save the session (which
# moves `updated_at`, and its counts and totals change with them), and the count and last
# id of its items (one query on an index) tell added or removed items apart.
_PARSED: OrderedDict[tuple[Any, ...], _Parsed] = OrderedDict()
_PARSED_KEPT = 4
_PARSED_LOCK = threading.Lock()


def _parsed(session: Session, url: str) -> _Parsed:
    items = session.items.aggregate(count=Count("pk"), last=Max("pk"))
    key = (
        session.pk,
        session.updated_at,
        session.item_count,
        session.blob_count,
        session.output_bytes_received,
        session.importer_version,
        items["count"],
        items["last"],
    )
    with _PARSED_LOCK:
        found = _PARSED.get(key)
        if found is not None:
            _PARSED.move_to_end(key)
            return found
    parsed = _Parsed(load_skeleton(session), url)
    with _PARSED_LOCK:
        _PARSED[key] = parsed
        while len(_PARSED) > _PARSED_KEPT:
            _PARSED.popitem(last=False)
    return parsed


def _filter_query(step_filter: StepFilter) -> QueryDict:
    query = QueryDict(mutable=True)
    if step_filter.errors:
        query["errors"] = "1"
    if step_filter.blobs:
        query["blobs"] = "1"
    if step_filter.tool:
        query["tool"] = step_filter.tool
    return query


def _selector(arguments: Any) -> str:
    arguments = parse_arguments(arguments)
    if isinstance(arguments, dict) and isinstance(arguments.get("selector"), str):
        return arguments["selector"]
    return ""


def _label(step: Step) -> str:
    return f"#{step.seq} {step.tool[:LABEL_CHARS] or 'tool result'}"


def _mark_label(mark: Mark) -> str:
    """The words behind an outline mark (its aria-label and title)."""
    step = mark.step
    if mark.count == 1:
        words = f"{_label(step)}, {step.received_bytes:,} bytes"
        return words + (", error" if step.is_error else "") + ("" if step.result else ", no result")
    words = (
        f"#{mark.first.seq}–#{mark.last.seq}: {mark.count} steps, "
        f"biggest {step.received_bytes:,} bytes"
    )
    return words + (f", {mark.errors} error{'s' if mark.errors > 1 else ''}" if mark.errors else "")


def _titles(session: Session, steps: list[Step]) -> dict[str, str]:
    """One-line titles of *steps* (`Read src/app.py`), reading only their calls' items."""
    seqs = {step.assistant.seq for step in steps if step.assistant is not None}
    calls = dict(session.items.filter(seq__in=seqs).values_list("seq", "tool_calls"))
    titles: dict[str, str] = {}
    for step in steps:
        arguments: Any = None
        if step.assistant is not None and step.call is not None:
            recorded = calls.get(step.assistant.seq)
            if isinstance(recorded, list) and step.call.index < len(recorded):
                call = recorded[step.call.index]
                arguments = call.get("arguments") if isinstance(call, dict) else None
        titles[step.anchor] = one_line(
            step.tool or "tool result", arguments, limit=TITLE_CHARS, path_chars=PATH_CHARS
        )
    return titles


def step_url(session: Session, seq: int) -> str:
    """The timeline URL that shows item *seq* of *session*: its page and its anchor
    (`#step-<seq>` for a tool result with its call, else `#item-<seq>`). For links from
    other pages (an item's page, search hits)."""
    return Timeline(session, StepFilter()).item_href(seq)


def page_context(session: Session, query: Mapping[str, str]) -> dict[str, Any]:
    """Everything the session page shows for *query* (`page`, `errors`, `blobs`, `tool`,
    `outline=biggest`); a page number out of range shows the nearest page."""
    timeline = Timeline(session, StepFilter.from_query(query), query=query)
    count = timeline.layout.page_count
    try:
        number = min(max(int(query.get("page") or 1), 1), count)
    except ValueError:
        number = 1
    units = timeline.page(number)
    steps = [step for unit in units for step in unit.steps]
    biggest = query.get("outline") == "biggest"
    return {
        "session": session,
        "timeline": timeline,
        "filter": timeline.filter,
        "units": units,
        "page_number": number,
        "page_count": count,
        "prev_url": timeline.page_url(number - 1) if number > 1 else "",
        "next_url": timeline.page_url(number + 1) if number < count else "",
        "first_step": steps[0].step.seq if steps else None,
        "last_step": steps[-1].step.seq if steps else None,
        "steps_on_page": len(steps),
        "outline": timeline.outline(number, biggest=biggest),
        "biggest": biggest,
        "outline_url": _toggled(timeline, number, biggest=not biggest),
        "counts": timeline.counts,
        # The address of what is shown, without empty or unknown parameters.
        "canonical_url": timeline.page_url(number),
        # Called by the template only when it draws the header (not for htmx swaps).
        "chart": partial(timeline.chart, number),
        "meta": {"args": arguments_view("", session.meta, budget=META_BYTES)}
        if session.meta
        else None,
    }


def _toggled(timeline: Timeline, number: int, *, biggest: bool) -> str:
    query = timeline.query.copy()
    query.pop("outline", None)
    if biggest:
        query["outline"] = "biggest"
    if number > 1:
        query["page"] = str(number)
    encoded = query.urlencode()
    return f"{timeline.url}?{encoded}" if encoded else timeline.url


def item_page_context(item: Item) -> dict[str, Any]:
    """An item's own page: a tool result as its step (arguments and output whole), an
    assistant item with its calls (arguments whole), a message whole; and the link back
    to where the timeline shows it."""
    timeline = Timeline(item.session, StepFilter())
    context: dict[str, Any] = {
        "item": item,
        "session": item.session,
        "timeline_url": timeline.item_href(item.seq),
        "shown": None,
        "shown_steps": [],
        "result": item if item.type == Item.Type.TOOL_RESULT else None,
    }
    if item.type == Item.Type.TOOL_RESULT:
        step = timeline.step_of_result(item.seq)
        if step is not None:
            items = {item.seq: item}
            if step.assistant is not None:
                items[step.assistant.seq] = item.session.items.get(seq=step.assistant.seq)
            context["shown"] = timeline.shown_step(step, items, args_budget=None)
    elif item.type == Item.Type.ASSISTANT:
        steps = [
            s for s in timeline.steps if s.assistant is not None and s.assistant.seq == item.seq
        ]
        results = {s.result.seq for s in steps if s.result is not None}
        items = {
            loaded.seq: loaded for loaded in timeline_items(item.session).filter(seq__in=results)
        }
        items[item.seq] = item
        context["shown_steps"] = [timeline.shown_step(s, items, args_budget=None) for s in steps]
    return context
