"""A session's timeline under a filter: which page shows each step, links to any step,
and one page's units with their items loaded, ready for the template."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict
from django.urls import reverse

from blobviewer.models import Item, Session
from blobviewer.timeline.paging import (
    ARGS_BYTES,
    BIGGEST_SHOWN,
    NAME_CHARS,
    PATH_CHARS,
    READER_SELECTOR_BYTES,
    READERS_SHOWN,
    TITLE_CHARS,
    TOOLS_BYTES,
    TOOLS_LISTED,
    TURN_TEXTS_SHOWN,
    Layout,
    Piece,
)
from blobviewer.timeline.parsed import ParsedSession, filter_query, parsed_session
from blobviewer.timeline.previews import timeline_items
from blobviewer.timeline.skeleton import Skeleton
from blobviewer.timeline.steps import TOOL_CHARS, Step, StepFilter, Unit, biggest_steps
from blobviewer.timeline.tool_args import (
    ArgsView,
    arguments_view,
    decoded_arguments,
    html_size,
    one_line,
)


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
    call_title: str = ""  # what an importer says the call is (a Codex poll: `npm test · poll 2`)
    polls_href: str = ""  # a Codex poll: the step of the command it reads on
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
        self._by_call_id: dict[str, Step] | None = None  # steps by their call's id, once asked
        self.query = filter_query(step_filter)
        # How the outline is ordered goes with every link, filtered or not: a jump to a
        # step (from the outline, the chart, a hidden step) keeps "biggest outputs first".
        self.unfiltered_query = QueryDict(mutable=True)
        if (query or {}).get("outline") == "biggest":
            self.query["outline"] = self.unfiltered_query["outline"] = "biggest"
        parsed = (
            ParsedSession(skeleton, self.url) if skeleton else parsed_session(session, self.url)
        )
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
            query = (self.query if filtered else self.unfiltered_query).copy()
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

    def _polled_href(self, call: Any, current: int | None) -> str:
        """The link to the step of the call that *call* polls (its `polls`), else ""."""
        polls = call.get("polls") if isinstance(call, dict) else None
        if not isinstance(polls, str):
            return ""
        if self._by_call_id is None:
            self._by_call_id = {s.call.id: s for s in self.steps if s.call is not None}
        step = self._by_call_id.get(polls)
        return self.href(step, current=current) if step is not None else ""

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
        listed: list[tuple[str, int]] = []
        spent = 0
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
        shown_item = result or assistant
        item_url = shown_item.get_absolute_url() if shown_item is not None else ""
        shown = ShownStep(
            step=step,
            result=result,
            call=call,
            args=args,
            title=tool,
            call_title=_call_title(call),
            polls_href=self._polled_href(call, current),
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


def _selector(arguments: Any) -> str:
    arguments = decoded_arguments(arguments)
    if isinstance(arguments, dict) and isinstance(arguments.get("selector"), str):
        return arguments["selector"]
    return ""


def _titles(session: Session, steps: list[Step]) -> dict[str, str]:
    """One-line titles of *steps* (`Read src/app.py`), reading only their calls' items."""
    seqs = {step.assistant.seq for step in steps if step.assistant is not None}
    calls = dict(session.items.filter(seq__in=seqs).values_list("seq", "tool_calls"))
    titles: dict[str, str] = {}
    for step in steps:
        arguments: Any = None
        call: Any = None
        if step.assistant is not None and step.call is not None:
            recorded = calls.get(step.assistant.seq)
            if isinstance(recorded, list) and step.call.index < len(recorded):
                call = recorded[step.call.index]
                arguments = call.get("arguments") if isinstance(call, dict) else None
        titles[step.anchor] = _call_title(call)[:TITLE_CHARS] or one_line(
            step.tool or "tool result", arguments, limit=TITLE_CHARS, path_chars=PATH_CHARS
        )
    return titles


def _call_title(call: Any) -> str:
    """The title an importer gave a call (`npm test · poll 2`), else ""."""
    title = call.get("title") if isinstance(call, dict) else None
    return title if isinstance(title, str) else ""
