"""How big a session page is, and how its units are cut into pages.

A page holds STEPS_PER_PAGE rows: a row is a step, a message, or one text of a turn (a
turn shows up to TURN_TEXTS_SHOWN of its texts); a turn's header takes no row of its own.
Every part of a row is cut to a known size: a step's arguments to ARGS_BYTES, its output
and any text to PREVIEW_BYTES (blobviewer.timeline.previews), its tool name to NAME_CHARS,
its importer's note to NOTE_CHARS, its links to later inspect calls to READERS_SHOWN. So a
row renders to at most ROW_BYTES, and STEPS_PER_PAGE rows stay under TIMELINE_BUDGET
whatever the steps hold or the filter shows. The header, filters, chart and outline have
limits of their own, and the whole page stays under PAGE_LIMIT.
"""

from __future__ import annotations

from dataclasses import dataclass

from blobviewer.timeline.steps import Step, Unit

PAGE_LIMIT = 200 * 1024
# The steps, texts and messages of a page, and the pager above and below them.
TIMELINE_BUDGET = 110_000
# The most a row renders to: a step with every part at its cap (4.8 KB, with tool names,
# arguments, output and note that escape to six times their size, and three links to
# later inspect calls) and the header of a turn without text; a message or a turn's text
# is smaller. tests/web/timeline/test_timeline_steps.py renders such rows under every
# filter and checks them against this.
ROW_BYTES = 5_400
STEPS_PER_PAGE = 20
assert STEPS_PER_PAGE * ROW_BYTES + 2_000 <= TIMELINE_BUDGET  # 2 KB: the two pagers
TURN_TEXTS_SHOWN = 3
# A turn's items that show no text are anchors (`<span id="item-…">`, about 45 bytes each):
# this many of them take a row.
ANCHORS_PER_ROW = 100

# The caps on a row's parts.
ARGS_BYTES = 600  # a step's arguments as the timeline shows them, escaped
NOTE_CHARS = 200  # an importer's note on a result (_step_result.html cuts it to this)
NAME_CHARS = 80  # tool names are cut to this on the timeline
READERS_SHOWN = 3  # links to later inspect calls of a step's blob
# An inspect call's link to the reader carries its selector only when it is short.
READER_SELECTOR_BYTES = 300

# The caps on the rest of the page.
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


def head_rows(unit: Unit) -> int:
    """The rows a unit takes before its steps: a message is one; a turn takes one per text
    it shows and one per ANCHORS_PER_ROW of its items."""
    if unit.kind == "message":
        return 1
    texts = sum(1 for item in unit.items if item.text_chars)
    return min(texts, TURN_TEXTS_SHOWN) + len(unit.items) // ANCHORS_PER_ROW


def paginate(units: list[Unit], *, per_page: int = STEPS_PER_PAGE) -> Layout:
    """Cut *units* into pages of at most *per_page* rows (see the module docstring). A
    unit that fits on a page is never split: it starts the next page when this one is
    too full. A turn with more rows than a page starts on a fresh page and continues on
    the next ones, *per_page* steps each. Every page holds at least one unit or step."""
    pages: list[list[Piece]] = [[]]
    used = 0
    for unit in units:
        head, steps = head_rows(unit), len(unit.steps)
        rows = max(1, head + steps)
        if rows <= per_page:
            if used + rows > per_page:
                pages.append([])
                used = 0
            pages[-1].append(Piece(unit, 0, steps))
            used += rows
            continue
        if pages[-1]:
            pages.append([])
        # The first piece holds the head and as many steps as fit beside it (one at least).
        start, end = 0, max(1, per_page - head)
        while end < steps:
            pages[-1].append(Piece(unit, start, end))
            pages.append([])
            start, end = end, end + per_page
        pages[-1].append(Piece(unit, start, steps))
        used = steps - start if start else rows
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
