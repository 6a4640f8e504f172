"""One page of a blob as the viewer shows it: the selected view, cut to fit a page.

The selection itself is core's (`core.selectors`), so the page shows what the model would
get. What this module adds is paging: a page holds at most LINES_PER_PAGE rows and about
PAGE_BUDGET bytes of content, and a line longer than LINE_BYTES is cut with a note,
so the HTML stays small whatever the blob's size. Every page knows its neighbours
(blobviewer.reader.paging): text pages go on with `lines:` windows, `slice:` and `keys:` pages
with windows of entries or keys, grep pages with the continuation the inspect tool gives
(the URL stays a selector the model could use); JSON shown as indented rows also goes on
row by row within one selected value (a `start` row number).

A text blob with no selector or only `lines:` steps, and a JSON blob's `slice:`, `key:` and
`keys:` steps, are read through the blob's index (core.store.index, in the store's `.index/`),
so a page deep inside a 100 MB blob reads only the bytes it shows; a big JSON blob without
a selector shows its indented rendering in `derived/`, read through that rendering's own
line index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.http import QueryDict
from django.utils.html import escape

from blobviewer.data_dir import renderings
from blobviewer.models import Blob
from blobviewer.reader.paging import (
    NO_LINKS,
    PageLinks,
    grep_links,
    line_links,
    range_links,
    row_links,
    without_trailing,
)
from core.content import cut_utf8, decode_text, encode_text, utf8_size
from core.grep import Page as GrepPage
from core.json_values import dumps_indented
from core.selectors import (
    Grep,
    GrepView,
    Keys,
    KeysView,
    Lines,
    LinesView,
    Selector,
    Slice,
    ValueView,
    apply_step,
    apply_steps,
    escape_surrogates,
    mapped_description,
)
from core.store import BlobCorrupt, BlobStore, BlobStoreError, StoreUnavailable
from core.store.index import TextIndex, open_index
from core.store.index.selection import selected_view
from core.wording import plural

LINES_PER_PAGE = 500
LINE_BYTES = 2_000  # a longer line is shown cut, with a note
# Bytes of escaped content per page, counted as the UTF-8 the HTML carries (a '€' is 3
# bytes, an emoji 4, a '<' becomes `&lt;`), so non-ASCII text fits the 200 KB page too.
PAGE_BUDGET = 120_000
# The markup around one row: its element with an id (prefixed in a reader opened in place),
# its number as a link, the line break.
_ROW_OVERHEAD = 128
GREP_CONTEXT = 10  # lines shown above a grep match when following it into the text
# Lines shown dimmed before and after each grep match on a page of a text blob, as a code
# search shows them; each cut to CONTEXT_BYTES, all of them within CONTEXT_BUDGET bytes.
CONTEXT_LINES = 2
CONTEXT_BYTES = 300
CONTEXT_BUDGET = 40_000
# A grep stops once it has a page of matches (then the page goes on with the continuation).
GREP_PAGE = GrepPage(max_bytes=PAGE_BUDGET, max_matches=LINES_PER_PAGE, line_bytes=LINE_BYTES)

# Lone surrogates (kept losslessly by the store) cannot be sent as UTF-8.
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Row:
    """One line on the page. *number* is its line number in the text (None for JSON)."""

    number: int | None
    text: str
    cut: int = 0  # characters of the line not shown
    target: str | None = None  # grep rows: the selector that shows the match in its text
    # grep pages: a line around a match, shown dimmed ("context"), or the gap before the
    # next group of lines ("gap", with no number); "" for a match (and any other row).
    role: str = ""


@dataclass(frozen=True, slots=True)
class ReaderPage:
    """*rows* hold the text a page shows: numbered lines, matches, or indented JSON (for
    which *value* keeps the selected value, so the reader can draw it as a tree)."""

    mode: str  # "lines" (numbered text), "json" (indented JSON) or "grep" (matches)
    rows: list[Row]
    caption: str  # where the page is, as `less` says it: "lines 1,201–1,240 of 1,310,720"
    # The neighbouring pages of the selection (windows of lines, entries or keys; grep's
    # continuation); for indented JSON, *row_links* go on row by row within the value.
    links: PageLinks = NO_LINKS
    row_links: PageLinks = NO_LINKS
    value: ValueView | KeysView | None = None
    # lines: the lines selected, of how many; grep: the lines searched, of how many.
    first: int | None = None
    last: int | None = None
    total: int | None = None
    grep: Grep | None = None  # grep: the step, to mark what matched within each line

    @property
    def has_cut_lines(self) -> bool:
        return any(row.cut for row in self.rows)


def blob_page(blob: Blob, selector: Selector, *, store: BlobStore, start: int = 1) -> ReaderPage:
    """The page of *blob* that *selector* selects; raises SelectorError for a bad fit."""
    if blob.kind == "text" and all(isinstance(s, Lines) for s in selector.steps):
        return _indexed_lines_page(blob, selector, store=store)
    if blob.kind.startswith("json_") and not selector.steps:
        page = _rendered_json_page(blob, start=start)
        if page is not None:
            return page
    view = selected_view(store, blob.id, selector, grep_page=GREP_PAGE)
    if isinstance(view, ValueView) and isinstance(view.value, str) and view.start is None:
        # A string reached by key: reads as text, with its own line numbers.
        view = apply_step(Lines(1, None), view, reached=str(selector))
        if not view.total:
            return ReaderPage("lines", [], "an empty string")
    if isinstance(view, LinesView):
        return _lines_page(view, selector)
    if isinstance(view, GrepView):
        page = _grep_page(view, selector)
        if blob.kind == "text" and all(isinstance(s, Lines) for s in selector.steps[:-1]):
            # Context never reaches a match that this page does not show.
            shown = len(page.rows)
            last = view.matches[shown][0] - 1 if shown < len(view.matches) else view.last
            page = _with_context(page, blob, selector, store=store, lines=(view.first, last))
        return page
    if isinstance(view, KeysView):
        return _keys_page(view, selector)
    return _json_page(view, selector, start=start)


# --- text ----------------------------------------------------------------------------------


def _indexed_lines_page(blob: Blob, selector: Selector, *, store: BlobStore) -> ReaderPage:
    with _text_index(blob, store) as index:
        total = index.line_count
        # The same steps on a text-less view give core's numbers and errors without the text.
        view = apply_steps(selector, LinesView("", 1, total, total))
        assert isinstance(view, LinesView)  # only `lines:` steps come here (blob_page)
        if not total:
            return ReaderPage("lines", [], "an empty text")
        end = min(view.last, view.first + LINES_PER_PAGE - 1)
        try:
            lines = index.read_lines(view.first, end, max_line_bytes=LINE_BYTES)
        except UnicodeDecodeError as error:
            raise BlobCorrupt(f"blob {blob.id} is not UTF-8: {error.reason}") from None
    rows = _fit((line.number, line.text, line.size) for line in lines)
    return _paged_lines(rows, view, selector)


def _lines_page(view: LinesView, selector: Selector) -> ReaderPage:
    if not view.total:
        return ReaderPage("lines", [], "an empty text")
    end = min(view.last, view.first + LINES_PER_PAGE - 1)
    return _paged_lines(_fit(_sized(view.numbered(view.first, end))), view, selector)


def _paged_lines(rows_in: Iterable[Row], view: LinesView, selector: Selector) -> ReaderPage:
    rows = list(rows_in)
    shown_last = (rows[-1].number if rows else None) or view.first - 1
    # The window is what was selected, or what fitted when the page stopped short of it.
    cut = shown_last < view.last
    window = (shown_last if cut else view.last) - view.first + 1
    links = line_links(
        _without_trailing_lines(selector),
        first=view.first,
        last=shown_last,
        total=view.total,
        window=window,
    )
    caption = f"lines {view.first:,}–{shown_last:,} of {view.total:,}"
    return ReaderPage(
        "lines", rows, caption, links=links, first=view.first, last=view.last, total=view.total
    )


def _without_trailing_lines(selector: Selector) -> Selector:
    return without_trailing(selector, Lines)


# --- grep ----------------------------------------------------------------------------------


def _grep_page(view: GrepView, selector: Selector) -> ReaderPage:
    """The first matches that fit a page; the next page greps on from the first match not
    shown (or the first line not searched, when the search stopped at a page of matches),
    as the inspect tool's continuation does (see page_links.grep_links)."""
    found = len(view.matches)
    step = selector.steps[-1]
    assert isinstance(step, Grep)
    base = _without_trailing_lines(Selector(selector.steps[:-1]))
    rows = []
    for row in _fit(_sized(view.matches[:LINES_PER_PAGE])):
        n = row.number or 1
        rows.append(Row(n, row.text, row.cut, target=_line_target(base, n)))
    searched_all = view.complete  # False: the search stopped at a page of matches
    resume = None
    if len(rows) < found:
        resume = view.matches[len(rows)][0]
    elif not searched_all:
        resume = view.last + 1
    searched = f"lines {view.first:,}–{view.last:,}"
    if view.total:
        searched += f" of {view.total:,}"
    if not found and resume is None:
        caption = f"no lines match {escape_surrogates(step.pattern)} in {searched}"
    elif resume is None:
        caption = f"{plural(found, 'match', 'matches')} in {searched}"
    elif searched_all:
        caption = f"matches 1–{len(rows):,} of {found:,} in {searched}"
    else:
        caption = f"{plural(len(rows), 'match', 'matches')} in {searched}; more follow"
    links = grep_links(selector, searched_first=view.first, resume=resume)
    return ReaderPage(
        "grep",
        rows,
        caption,
        links=links,
        first=view.first,
        last=view.last,
        total=view.total,
        grep=step,
    )


def _line_target(base: Selector, number: int) -> str:
    """The selector that shows line *number* of *base*'s text, a few lines below the top."""
    first = max(1, number - GREP_CONTEXT)
    return str(base.then(Lines(first, number + LINES_PER_PAGE - GREP_CONTEXT)))


def _with_context(
    page: ReaderPage,
    blob: Blob,
    selector: Selector,
    *,
    store: BlobStore,
    lines: tuple[int, int],
) -> ReaderPage:
    """*page* (grep over a text blob, or over lines of it) with CONTEXT_LINES lines before
    and after each match, within *lines* (first, last), read through the blob's index (one
    read per group of nearby matches), and a gap row between groups. Context stops once
    CONTEXT_BUDGET bytes are spent: the matches are what the page is for."""
    if not page.rows:
        return page
    base = _without_trailing_lines(Selector(selector.steps[:-1]))
    matches = {row.number or 1: row for row in page.rows}
    rows: list[Row] = []
    budget = CONTEXT_BUDGET
    with _text_index(blob, store) as index:
        for first, last in _groups(list(matches), *lines):
            if rows:
                rows.append(Row(None, "", role="gap"))
            around = _read_lines(index, blob, first, last) if budget > 0 else {}
            for number in range(first, last + 1):
                if (match := matches.get(number)) is not None:
                    rows.append(match)
                elif (line := around.get(number)) is not None and budget > 0:
                    budget -= len(line.text) + _ROW_OVERHEAD
                    cut = 0 if line.size < 0 else max(0, line.size - utf8_size(line.text))
                    text = _SURROGATES.sub("\ufffd", line.text)  # as _fit shows them
                    target = _line_target(base, number)
                    rows.append(Row(number, text, cut, target=target, role="context"))
    return replace(page, rows=rows)


def _groups(numbers: list[int], low: int, high: int) -> list[tuple[int, int]]:
    """The line ranges that CONTEXT_LINES around each of *numbers* (ascending) cover,
    within *low*..*high*, ranges that touch merged."""
    groups: list[tuple[int, int]] = []
    for number in numbers:
        first, last = max(low, number - CONTEXT_LINES), min(high, number + CONTEXT_LINES)
        if groups and first <= groups[-1][1] + 1:
            groups[-1] = (groups[-1][0], max(groups[-1][1], last))
        else:
            groups.append((first, last))
    return groups


def _read_lines(index: TextIndex, blob: Blob, first: int, last: int) -> dict[int, Any]:
    """Lines *first*..*last* of *blob* by number, each cut to CONTEXT_BYTES."""
    try:
        lines = index.read_lines(first, last, max_line_bytes=CONTEXT_BYTES)
    except UnicodeDecodeError as error:
        raise BlobCorrupt(f"blob {blob.id} is not UTF-8: {error.reason}") from None
    return {line.number: line for line in lines}


def _text_index(blob: Blob, store: BlobStore) -> TextIndex:
    """The line index of the text blob *blob* (a context manager that closes it)."""
    try:
        index = open_index(store, blob.id, min_bytes=store.index_min_bytes)
    except BlobStoreError:
        raise
    except OSError as error:
        raise BlobStoreError(f"cannot read blob {blob.id}: {error.strerror}") from None
    if not isinstance(index, TextIndex):
        raise BlobCorrupt(f"blob {blob.id} changed while it was read")
    return index


# --- JSON ----------------------------------------------------------------------------------


def _json_page(view: ValueView, selector: Selector, *, start: int) -> ReaderPage:
    text = dumps_indented(view.value)
    total = text.count("\n") + 1
    first = min(max(start, 1), total)
    rows = list(_fit(_sized(_json_lines(text, first))))
    caption, links = "", NO_LINKS
    if view.missing is not None:  # key: over an array: each entry's value
        caption = f"{mapped_description(view)} · "
    elif view.start is not None:  # a slice: windows of as many entries
        stop = view.start + len(view.value)
        caption = f"entries {view.start}..{stop} of {view.total or 0:,} · "
        base = without_trailing(selector, Slice)
        links = range_links(base, Slice, start=view.start, stop=stop, total=view.total or 0)
    return _paged_json(rows, first, total, caption, links=links, value=view)


def _keys_page(view: KeysView, selector: Selector) -> ReaderPage:
    """`keys:A..B`: one key line (name and shape) a row, paged by windows of keys."""
    stop = view.start + len(view.keys)
    rows = list(_fit(_sized(enumerate(view.lines(), start=1))))
    links = range_links(
        without_trailing(selector, Keys), Keys, start=view.start, stop=stop, total=view.total
    )
    caption = f"keys {view.start}..{stop} of {view.total:,}"
    return ReaderPage("json", rows, caption, links=links, value=view)


def _rendered_json_page(blob: Blob, *, start: int) -> ReaderPage | None:
    """The page of a big JSON blob read from its indented rendering (see blobviewer.catalog.blobs);
    None when the rendering is gone, and the blob itself is read instead."""
    rendered = renderings()
    try:
        index = open_index(rendered, blob.id, min_bytes=0)  # made now if it was deleted
    except StoreUnavailable:
        raise  # not a missing rendering: reading the blob whole would wait on it again
    except (BlobStoreError, OSError):
        return None
    if not isinstance(index, TextIndex):
        return None
    with index:
        total = index.line_count
        first = min(max(start, 1), total)
        lines = index.read_lines(first, first + LINES_PER_PAGE - 1, max_line_bytes=LINE_BYTES)
    rows = list(_fit((line.number, line.text, line.size) for line in lines))
    return _paged_json(rows, first, total)


def _paged_json(
    rows: list[Row],
    first: int,
    total: int,
    caption: str = "",
    *,
    links: PageLinks = NO_LINKS,
    value: ValueView | None = None,
) -> ReaderPage:
    last = first + len(rows) - 1
    return ReaderPage(
        "json",
        rows,
        f"{caption}JSON lines {first:,}–{last:,} of {total:,}",
        links=links,
        row_links=row_links(first=first, shown=len(rows), total=total, per_page=LINES_PER_PAGE),
        value=value,
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
