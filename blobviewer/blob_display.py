"""One page of a blob as the viewer shows it: the selected view, cut to fit a page.

The selection itself is core's (`core.selectors`), so the page shows what the model would
get. What this module adds is paging: a page holds at most LINES_PER_PAGE rows and about
PAGE_BUDGET bytes of content, and a line longer than LINE_BYTES is cut with a note,
so the HTML stays small whatever the blob's size. Plain text pages go on with a `lines:`
selector (the URL stays a selector the model could use); JSON and grep results go on with
a `start` row number.

A text blob with no selector or only `lines:` steps, and a JSON blob's `slice:`, `key:` and
`keys:` steps, are read through the blob's index (core.index, in the store's `.index/`),
so a page deep inside a 100 MB blob reads only the bytes it shows; a big JSON blob without
a selector shows its indented rendering in `derived/`, read through that rendering's own
line index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.http import QueryDict
from django.utils.html import escape

from blobviewer.data_dir import renderings
from blobviewer.models import Blob
from core.blob_store import JSON_SUFFIX, BlobCorrupt, BlobStoreError, FsBlobStore
from core.content import cut_utf8, decode_text, encode_text, utf8_size
from core.index import IndexUnusable, JsonIndex, TextIndex, open_index
from core.index.selection import NotIndexed, materialize, select
from core.json_values import dumps_indented
from core.selectors import (
    GrepView,
    Lines,
    LinesView,
    Selector,
    ValueView,
    View,
    apply_step,
    apply_steps,
    evaluate,
)

LINES_PER_PAGE = 500
LINE_BYTES = 2_000  # a longer line is shown cut, with a note
# Bytes of escaped content per page, counted as the UTF-8 the HTML carries (a '€' is 3
# bytes, an emoji 4, a '<' becomes `&lt;`), so non-ASCII text fits the 200 KB page too.
PAGE_BUDGET = 120_000
_ROW_OVERHEAD = 64  # the markup around one row: its number, anchor and line break
GREP_CONTEXT = 10  # lines shown above a grep match when following it into the text

# Lone surrogates (kept losslessly by the store) cannot be sent as UTF-8.
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Row:
    """One line on the page. *number* is its line number in the text (None for JSON)."""

    number: int | None
    text: str
    cut: int = 0  # characters of the line not shown
    target: str | None = None  # grep rows: the selector that shows the match in its text


@dataclass(frozen=True, slots=True)
class Page:
    mode: str  # "lines" (numbered text), "json" (indented JSON) or "grep" (matches)
    rows: list[Row]
    caption: str  # e.g. "lines 1-500 of 2,000,000"
    # Where the neighbouring pages are: a selector (text) and/or a start row (JSON, grep).
    next_selector: str | None = None
    prev_selector: str | None = None
    next_start: int | None = None
    prev_start: int | None = None

    @property
    def has_cut_lines(self) -> bool:
        return any(row.cut for row in self.rows)


def blob_page(blob: Blob, selector: Selector, *, store: FsBlobStore, start: int = 1) -> Page:
    """The page of *blob* that *selector* selects; raises SelectorError for a bad fit."""
    if blob.kind == "text" and all(isinstance(s, Lines) for s in selector.steps):
        return _indexed_lines_page(blob, selector, store=store)
    if blob.kind.startswith("json_") and not selector.steps:
        page = _rendered_json_page(blob, start=start)
        if page is not None:
            return page
    view = _selected_view(blob, selector, store=store)
    if isinstance(view, ValueView) and isinstance(view.value, str) and view.start is None:
        # A string reached by key: reads as text, with its own line numbers.
        view = apply_step(Lines(1, None), view, reached=str(selector))
        if not view.total:
            return Page("lines", [], "an empty string")
    if isinstance(view, LinesView):
        return _lines_page(view, selector)
    if isinstance(view, GrepView):
        return _grep_page(view, selector, start=start)
    return _json_page(view, start=start)


def _selected_view(blob: Blob, selector: Selector, *, store: FsBlobStore) -> View:
    """What *selector* selects, as core.selectors.evaluate gives it; for a JSON blob read
    through its index, so only the parts selected are read and parsed."""
    path = store.path_of(blob.id)
    if path.suffix == JSON_SUFFIX and selector.steps:
        try:
            index = open_index(store.root, path, min_bytes=store.index_min_bytes)
        except OSError as error:
            raise BlobStoreError(f"cannot read blob {blob.id}: {error.strerror}") from None
        if isinstance(index, JsonIndex):
            try:
                with index:
                    return materialize(index, select(index, selector))
            except (IndexUnusable, NotIndexed):
                pass  # damaged or stale after all: read the blob itself
    return evaluate(selector, store.load_sync(blob.id))


# --- text ----------------------------------------------------------------------------------


def _indexed_lines_page(blob: Blob, selector: Selector, *, store: FsBlobStore) -> Page:
    path = store.path_of(blob.id)
    try:
        index = open_index(store.root, path, min_bytes=store.index_min_bytes)
    except OSError as error:
        raise BlobStoreError(f"cannot read blob {blob.id}: {error.strerror}") from None
    if not isinstance(index, TextIndex):
        raise BlobCorrupt(f"blob {blob.id} changed while it was read")
    with index:
        total = index.line_count
        # The same steps on a text-less view give core's numbers and errors without the text.
        view = apply_steps(selector, LinesView("", 1, total, total))
        if not total:
            return Page("lines", [], "an empty text")
        end = min(view.last, view.first + LINES_PER_PAGE - 1)
        try:
            lines = index.read_lines(view.first, end, max_line_bytes=LINE_BYTES)
        except UnicodeDecodeError as error:
            raise BlobCorrupt(f"blob {blob.id} is not UTF-8: {error.reason}") from None
    rows = _fit((line.number, line.text, line.size) for line in lines)
    return _paged_lines(rows, view, selector)


def _lines_page(view: LinesView, selector: Selector) -> Page:
    if not view.total:
        return Page("lines", [], "an empty text")
    end = min(view.last, view.first + LINES_PER_PAGE - 1)
    return _paged_lines(_fit(_sized(view.numbered(view.first, end))), view, selector)


def _paged_lines(rows_in: Iterable[Row], view: LinesView, selector: Selector) -> Page:
    rows = list(rows_in)
    shown_last = rows[-1].number if rows else view.first - 1
    base = _without_trailing_lines(selector)
    next_selector = prev_selector = None
    if shown_last is not None and shown_last < view.last:
        next_selector = str(base.then(Lines(shown_last + 1, view.last)))
    if view.first > 1 and _ends_with_lines(selector):
        prev_first = max(1, view.first - LINES_PER_PAGE)
        prev_selector = str(base.then(Lines(prev_first, view.first - 1)))
    caption = f"lines {view.first:,}-{shown_last:,} of {view.total:,}"
    return Page("lines", rows, caption, next_selector=next_selector, prev_selector=prev_selector)


def _without_trailing_lines(selector: Selector) -> Selector:
    steps = list(selector.steps)
    while steps and isinstance(steps[-1], Lines):
        steps.pop()
    return Selector(tuple(steps))


def _ends_with_lines(selector: Selector) -> bool:
    """Whether the page starts where a `lines:` step put it, so earlier lines can follow."""
    return bool(selector.steps) and isinstance(selector.steps[-1], Lines)


# --- grep ----------------------------------------------------------------------------------


def _grep_page(view: GrepView, selector: Selector, *, start: int) -> Page:
    total = len(view.matches)
    first = min(max(start, 1), max(total, 1))
    base = _without_trailing_lines(Selector(selector.steps[:-1]))
    window = view.matches[first - 1 : first - 1 + LINES_PER_PAGE]
    rows = []
    for row in _fit(_sized(window)):
        n = row.number or 1
        context = base.then(Lines(max(1, n - GREP_CONTEXT), n + LINES_PER_PAGE - GREP_CONTEXT))
        rows.append(Row(n, row.text, row.cut, target=str(context)))
    last = first + len(rows) - 1
    caption = (
        f"matches {first:,}-{last:,} of {total:,} for {selector.steps[-1]}"
        if total
        else f"no line matches {selector.steps[-1]}"
    )
    return Page(
        "grep",
        rows,
        caption,
        next_start=last + 1 if last < total else None,
        prev_start=max(1, first - LINES_PER_PAGE) if first > 1 else None,
    )


# --- JSON ----------------------------------------------------------------------------------


def _json_page(view: ValueView, *, start: int) -> Page:
    text = dumps_indented(view.value)
    total = text.count("\n") + 1
    first = min(max(start, 1), total)
    rows = [Row(None, row.text, row.cut) for row in _fit(_sized(_json_lines(text, first)))]
    caption = ""
    if view.start is not None:
        stop = view.start + len(view.value)
        caption = f"entries {view.start}..{stop} of {view.total:,} — "
    return _paged_json(rows, first, total, caption)


def _rendered_json_page(blob: Blob, *, start: int) -> Page | None:
    """The page of a big JSON blob read from its indented rendering (see blob_index);
    None when the rendering is gone, and the blob itself is read instead."""
    rendered = renderings()
    try:
        path = rendered.path_of(blob.id)
        index = open_index(rendered.root, path, min_bytes=0)  # made now if it was deleted
    except (BlobStoreError, OSError):
        return None
    if not isinstance(index, TextIndex):
        return None
    with index:
        total = index.line_count
        first = min(max(start, 1), total)
        lines = index.read_lines(first, first + LINES_PER_PAGE - 1, max_line_bytes=LINE_BYTES)
    rows = [
        Row(None, row.text, row.cut)
        for row in _fit((line.number, line.text, line.size) for line in lines)
    ]
    return _paged_json(rows, first, total)


def _paged_json(rows: list[Row], first: int, total: int, caption: str = "") -> Page:
    last = first + len(rows) - 1
    return Page(
        "json",
        rows,
        f"{caption}JSON lines {first:,}-{last:,} of {total:,}",
        next_start=last + 1 if last < total else None,
        prev_start=max(1, first - LINES_PER_PAGE) if first > 1 else None,
    )


def _json_lines(text: str, first: int) -> Iterator[tuple[int, str]]:
    """Lines *first*.. of an indented JSON text, found without splitting all of it."""
    position = 0
    for _ in range(first - 1):
        position = text.index("\n", position) + 1
    number = first
    while position <= len(text):
        end = text.find("\n", position)
        end = len(text) if end < 0 else end
        yield number, text[position:end]
        number += 1
        position = end + 1


# --- fitting a page ------------------------------------------------------------------------


def _sized(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str, int]]:
    """(number, the line cut to LINE_BYTES, its whole size in bytes or -1 when not cut)."""
    for number, line in numbered:
        if len(line) * 4 <= LINE_BYTES:  # short enough whatever its characters
            yield number, line, -1
            continue
        head = encode_text(line[:LINE_BYTES])
        if len(line) <= LINE_BYTES and len(head) <= LINE_BYTES:
            yield number, line, -1
            continue
        yield number, decode_text(cut_utf8(head, LINE_BYTES)), utf8_size(line)


def _fit(lines: Iterable[tuple[int, str, int]]) -> Iterator[Row]:
    """Rows for as many (number, shown text, whole size) lines as fit on one page.

    A size of -1 means the text is the whole line.
    """
    budget = PAGE_BUDGET
    for count, (number, shown, size) in enumerate(lines):
        if count >= LINES_PER_PAGE:
            return
        text = _SURROGATES.sub("\ufffd", shown) if _SURROGATES.search(shown) else shown
        cost = len(escape(text).encode()) + _ROW_OVERHEAD
        if count and cost > budget:
            return
        budget -= cost
        cut = 0 if size < 0 else max(0, size - utf8_size(shown))
        yield Row(number, text, cut)


def selector_url(base_url: str, selector: str | None, start: int | None = None) -> str:
    """*base_url* showing *selector* (from row *start*), as the selector box would ask."""
    query = QueryDict(mutable=True)
    if selector:
        query["selector"] = selector
    if start and start > 1:
        query["start"] = str(start)
    return f"{base_url}?{query.urlencode()}" if query else base_url
