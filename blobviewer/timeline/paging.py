"""How big a session page is, and how its units are cut into pages.

Every part of a step the page shows is cut to a known size (arguments, output, tool name,
importer note), so the layout can add up an upper bound of each step's HTML and keep a
page under TIMELINE_BUDGET whatever the filter; the outline and the chart are bounded
too, so the whole page stays under PAGE_LIMIT.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from blobviewer.timeline.previews import BLOB_REF_CHARS, LINK_MARKUP, PREVIEW_BYTES
from blobviewer.timeline.steps import Step, Unit
from blobviewer.timeline.tool_args import html_size

# A page is at most 200 KB. The header, filters, chart and outline are bounded
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


def _text_cost(chars: int) -> int:
    # Escaping makes a character at most 6 bytes (`&quot;`), and blob links add their
    # markup; the preview itself stops at PREVIEW_BYTES plus a blob reference kept whole.
    return min(PREVIEW_BYTES + BLOB_REF_CHARS + LINK_MARKUP, 10 * chars)


class Costs:
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


@dataclass(frozen=True, slots=True)
class Piece:
    """The part of a unit on one page: its steps[start:end]. A turn too big for a page is
    cut into pieces; *continued* ones start on a later page than the turn."""

    unit: Unit
    start: int
    end: int

    @property
    def continued(self) -> bool:
        return self.start > 0

    @property
    def continues(self) -> bool:
        return self.end < len(self.unit.steps)

    @property
    def steps(self) -> list[Step]:
        return self.unit.steps[self.start : self.end]


@dataclass(frozen=True, slots=True)
class Layout:
    """The pages of a (filtered) timeline, and on which page each step and item is."""

    pages: list[list[Piece]]
    page_of_anchor: dict[str, int]  # `step-…`/`call-…` anchor -> page number (from 1)
    page_of_item: dict[int, int]  # seq of every shown item -> page number

    @property
    def page_count(self) -> int:
        return len(self.pages)

    def page(self, number: int) -> list[Piece]:
        return self.pages[number - 1]


def paginate(
    units: list[Unit],
    *,
    budget: int,
    head_cost: Callable[[Unit], int],
    step_cost: Callable[[Step], int],
    continued_cost: int,
) -> Layout:
    """Pack *units* into pages whose costs (bytes of HTML, as the callables estimate them)
    add up to at most *budget*. A page always holds at least one step or unit, so a cost
    above the budget cannot loop; a turn bigger than a page starts on a fresh page and
    continues on the next ones, each continuation costing *continued_cost* for its head."""
    pages: list[list[Piece]] = [[]]
    used = 0

    def new_page() -> None:
        nonlocal used
        pages.append([])
        used = 0

    for unit in units:
        head = head_cost(unit)
        costs = [step_cost(step) for step in unit.steps]
        total = head + sum(costs)
        if total <= budget:
            if pages[-1] and used + total > budget:
                new_page()
            pages[-1].append(Piece(unit, 0, len(unit.steps)))
            used += total
            continue
        if pages[-1]:
            new_page()
        start, used = 0, head
        for index, cost in enumerate(costs):
            if used + cost > budget and index > start:
                pages[-1].append(Piece(unit, start, index))
                new_page()
                start, used = index, continued_cost
            used += cost
        pages[-1].append(Piece(unit, start, len(unit.steps)))
    if len(pages) > 1 and not pages[-1]:
        pages.pop()

    page_of_anchor: dict[str, int] = {}
    page_of_item: dict[int, int] = {}
    for number, pieces in enumerate(pages, start=1):
        for piece in pieces:
            if not piece.continued:
                for item in piece.unit.items:
                    page_of_item.setdefault(item.seq, number)
            for step in piece.steps:
                page_of_anchor[step.anchor] = number
                if step.result is not None:
                    page_of_item[step.result.seq] = number
    return Layout(pages, page_of_anchor, page_of_item)
