"""The reader around a blob page: how the page blob_display built is shown.

`reader_view` takes that page and adds what makes it read like a good file viewer:

- the pager (first, previous, next, last, from blobviewer.reader.paging) and the position,
  as `less` says it; a view that shows everything says so;
- line ids prefixed per reader (`L12` on the blob's page, `item-3-blob-L12` in a reader
  opened in place on a timeline), so several readers on one page keep them unique;
- JSON as a tree (blobviewer.reader.json_tree) or as raw indented rows, switched with `as=raw`;
- grep matches marked within their lines, as (text, matched) pieces for the template;
- code and diffs coloured through blobviewer.reader.colour: text pieces with the classes of
  their tokens, escaped by the template like all blob text;
- selector help fitted to the blob (blobviewer.reader.selector_help).

It reads nothing big: the tree and the help use the value the page already holds, the
value of a blob under SMALL_JSON bytes, or the first megabyte of a big blob's rendering.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, QueryDict

from blobviewer.catalog.provenance import CALL_LOOK_BACK, calls_in
from blobviewer.data_dir import renderings
from blobviewer.models import Blob, Item
from blobviewer.reader.colour import (
    Piece,
    coloured_lines,
    diff_lexer,
    file_named_by,
    lexer_for_file,
    looks_like_diff,
)
from blobviewer.reader.display import ReaderPage
from blobviewer.reader.json_tree import (
    TOP_CHILDREN,
    Head,
    TooBig,
    Tree,
    rendered_head,
    tree_of_entries,
    tree_of_keys,
    tree_of_value,
)
from blobviewer.reader.paging import NO_LINKS, PageLinks, Target, range_links, without_trailing
from blobviewer.reader.selector_help import (
    COMPLETIONS,
    SelectorHelp,
    array_help,
    object_help,
    scalar_help,
    string_help,
    text_help,
)
from blobviewer.templatetags.terminal import strip_terminal_codes
from core.content import Structured
from core.json_values import json_type, shape
from core.selectors import (
    Grep,
    Keys,
    KeysView,
    Lines,
    Selector,
    Slice,
    ValueView,
    mapped_description,
)
from core.store import BlobStore, BlobStoreError

# How much of a rendering is read for its first entry alone (the help's `key:` example).
FIRST_ENTRY_BYTES = 64 * 1024
RAW_PARAM = "as"  # `?as=raw`: JSON as indented rows instead of a tree
SMALL_JSON = 1 << 20  # a JSON blob this small may be read whole for its keys
COLOUR_EXTRA = 45_000  # bytes of colouring markup a page may add to its text
MARK_BUDGET = 15_000  # bytes of <mark> a grep page may add
_MARK_COST = len("<mark></mark>")
_HEAD_READ = 8_192  # bytes of a text blob read to tell whether it is a diff
_PAGER_LABELS = {"first": "« first", "prev": "‹ previous", "next": "next ›", "last": "last »"}


@dataclass(frozen=True, slots=True)
class ShownRow:
    """A row as the template draws it: *tokens* when coloured (text pieces with the class of
    their token type), else *pieces* (grep: text and whether it matched) when marked, else
    *text*. The template escapes every piece of text."""

    number: int | None
    text: str
    cut: int = 0
    tokens: tuple[Piece, ...] | None = None
    pieces: list[tuple[str, bool]] | None = None
    target: str = ""  # grep: the URL of the line in its text
    role: str = ""  # grep: "context" (a line around a match), "gap", or "" (a match)


@dataclass(frozen=True, slots=True)
class PagerLink:
    rel: str  # first, prev, next, last
    label: str
    url: str  # "" when there is no such page (drawn as a disabled step)


@dataclass
class Reader:
    prefix: str  # of line ids: "" on the blob's page, "<view id>-" in place
    mode: str = ""  # "lines", "grep", "tree" or "raw"; "" when no page is shown
    position: str = ""
    links: list[PagerLink] = field(default_factory=list)
    row_links: list[PagerLink] = field(default_factory=list)  # raw JSON: rows of one value
    rows: list[ShownRow] = field(default_factory=list)
    tree: Tree | None = None
    tree_more_url: str = ""  # the next page, when the tree shows the first part of a page
    json: bool = False  # a JSON view: offers the Tree / Raw switch
    tree_url: str = ""
    raw_url: str = ""
    help: SelectorHelp | None = None
    select_base: str = ""  # the steps before the lines, for "Select these lines"
    digits: int = 1  # of the longest line number, for the number column's width
    language: str = ""  # the lexer that coloured the page, if any
    note: str = ""

    @property
    def whole(self) -> bool:
        """Whether the view shows everything it selected (no page before or after)."""
        return bool(self.mode) and not any(link.url for link in self.links + self.row_links)

    @property
    def pages(self) -> bool:
        return any(link.url for link in self.links)


def reader_view(
    request: HttpRequest,
    blob: Blob,
    page: ReaderPage | None,
    *,
    selector: Selector | None,
    selector_text: str,
    base_url: str,
    view_id: str,
    in_place: bool,
    store: BlobStore,
) -> Reader:
    """The reader for *page* of *blob* (None when the selector failed or nothing can be
    shown), selected by *selector* (None when it did not parse; *selector_text* is what
    the box holds) at *base_url*, drawn in the element *view_id*."""
    raw = request.GET.get(RAW_PARAM) == "raw"
    urls = _Urls(base_url, selector_text, raw=raw)
    reader = Reader(prefix="" if not in_place else f"{view_id}-")
    whole = None  # the whole value, when the page holds it (no selector)
    held = page.value if page is not None else None
    if selector is not None and not selector.steps and isinstance(held, ValueView):
        whole = held.value if held.start is None else None
    facts = _Facts(blob, store, whole)
    if page is not None and selector is not None and not blob.missing and not blob.error:
        if page.mode == "lines":
            _lines(reader, page, selector, blob, store, urls)
        elif page.mode == "grep":
            _grep(reader, page, urls)
        elif raw:
            _raw_json(reader, page, urls)
        else:
            _tree(reader, page, selector, blob, facts, urls)
        if page.mode == "json":
            reader.json = True
            reader.tree_url = urls.of(selector_text, raw=False)
            reader.raw_url = urls.of(selector_text, raw=True)
        numbers = [row.number for row in reader.rows if row.number]
        reader.digits = len(str(max(numbers))) if numbers else 1
    if not blob.missing and not blob.error:
        reader.help = _help(blob, facts)
    return reader


# --- text ----------------------------------------------------------------------------------


def _lines(
    reader: Reader, page: ReaderPage, selector: Selector, blob: Blob, store: BlobStore, urls: _Urls
) -> None:
    reader.mode = "lines"
    reader.position = page.caption
    reader.links = _pager(page.links, urls)
    reader.select_base = str(without_trailing(selector, Lines))
    texts = [strip_terminal_codes(row.text) for row in page.rows]
    coloured: list[tuple[Piece, ...] | None] = [None] * len(texts)
    # Only the blob's own text: a string reached by key has no file type.
    lexer = None
    if blob.kind == "text" and all(isinstance(step, Lines) for step in selector.steps):
        lexer = _lexer_for(blob, store)
    if lexer is not None and texts:
        coloured = coloured_lines(texts, lexer, extra_budget=COLOUR_EXTRA) or coloured
        if any(coloured):
            reader.language = lexer.name
    reader.rows = [
        ShownRow(row.number, text, row.cut, tokens=tokens)
        for row, text, tokens in zip(page.rows, texts, coloured, strict=True)
    ]


def _grep(reader: Reader, page: ReaderPage, urls: _Urls) -> None:
    reader.mode = "grep"
    reader.position = page.caption
    reader.links = _pager(page.links, urls, rels=("first", "next"))
    budget = MARK_BUDGET
    rows = []
    for row in page.rows:
        if row.role == "gap":
            rows.append(ShownRow(None, "", role="gap"))
            continue
        text = strip_terminal_codes(row.text)
        pieces = None
        if page.grep is not None and budget > 0 and not row.role:
            pieces, used = _marked(text, page.grep, budget)
            budget -= used
        target = urls.of(row.target or "")
        rows.append(
            ShownRow(row.number, text, row.cut, pieces=pieces, target=target, role=row.role)
        )
    reader.rows = rows


def _marked(text: str, grep: Grep, budget: int) -> tuple[list[tuple[str, bool]], int]:
    """*text* as pieces (text, whether the regex matched it), with as many marks as
    *budget* bytes of markup allow; and the bytes used."""
    pieces: list[tuple[str, bool]] = []
    position = used = 0
    try:
        for match in _finditer(grep, text):
            start, end = match.span()
            if start == end:
                continue
            if used + _MARK_COST > budget:
                break
            pieces += [(text[position:start], False), (text[start:end], True)]
            position = end
            used += _MARK_COST
    except (TimeoutError, MemoryError, RecursionError, UnicodeError):
        pass  # marks are a help; the matching lines are shown all the same
    pieces.append((text[position:], False))
    return [piece for piece in pieces if piece[0]], used


def _finditer(grep: Grep, text: str) -> Any:
    """Where *grep*'s regex matches within *text*. RE2 (linear time, whatever the
    pattern) when the step holds an RE2 pattern; the `regex` module, with a time limit,
    when it holds one of those."""
    compiled = getattr(grep, "regex", None)
    if compiled is not None:
        return compiled.finditer(text, timeout=0.2)
    pattern = _re2_pattern(grep.pattern)
    return pattern.finditer(text) if pattern is not None else iter(())


@functools.lru_cache(maxsize=64)
def _re2_pattern(pattern: str) -> Any:
    import re2  # only steps compiled by core's RE2 grep get here, so it is installed

    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except (re2.error, UnicodeError):  # not for a pattern core compiled; marks are optional
        return None


def _lexer_for(blob: Blob, store: BlobStore) -> Any:
    """How to colour a text blob: a diff by its content, else by the file type that the
    call that made it names (`Read src/app.py`, `cat setup.cfg`); None for plain text."""
    try:
        with store.open_sync(blob.id) as text:
            head = text.read(0, _HEAD_READ).decode("utf-8", "replace")
    except (BlobStoreError, OSError):
        return None
    if looks_like_diff(head):
        return diff_lexer()
    made_by = making_call(blob)
    if made_by is None:
        return None
    name = file_named_by(*made_by)
    return lexer_for_file(name) if name else None


def making_call(blob: Blob) -> tuple[str, Any] | None:
    """The tool and arguments of the call that made *blob*: its maker (Blob.made_by, the
    first tool result whose output begins with its `[blob:<id>]`, never `inspect`; see
    blobviewer.catalog.provenance) and that result's call; the arguments are None when the call
    is not in the recording. None when no step made the blob."""
    if not blob.made_by_id:
        return None
    maker = (
        Item.objects.filter(pk=blob.made_by_id)
        .values_list("session_id", "seq", "call_id", "tool")
        .first()
    )
    if maker is None:
        return None
    session_id, seq, call_id, tool = maker
    if not call_id:
        return tool, None
    turns = (
        Item.objects.filter(session_id=session_id, type=Item.Type.ASSISTANT, seq__lt=seq)
        .order_by("-seq")
        .values_list("tool_calls", flat=True)[:CALL_LOOK_BACK]
    )
    for calls in turns:
        for found, name, arguments in calls_in(calls):
            if found == call_id:
                return name or tool, arguments
    return tool, None


# --- JSON ----------------------------------------------------------------------------------


def _raw_json(reader: Reader, page: ReaderPage, urls: _Urls) -> None:
    reader.mode = "raw"
    reader.position = page.caption
    reader.rows = [
        ShownRow(row.number, strip_terminal_codes(row.text), row.cut) for row in page.rows
    ]
    if page.links.any:
        reader.links = _pager(page.links, urls)
        if page.row_links.any:
            reader.row_links = _pager(page.row_links, urls)
    else:
        reader.links = _pager(page.row_links, urls)


def _tree(
    reader: Reader, page: ReaderPage, selector: Selector, blob: Blob, facts: _Facts, urls: _Urls
) -> None:
    reader.mode = "tree"
    view = page.value
    if isinstance(view, KeysView):
        tree = tree_of_keys(
            view.keys, start=view.start, total=view.total, selector=selector, url=urls.of
        )
        stop = view.start + tree.shown
        base = without_trailing(selector, Keys)
        links = range_links(base, Keys, start=view.start, stop=stop, total=view.total)
        reader.position = f"keys {view.start}..{stop} of {view.total:,}"
    elif isinstance(view, ValueView) and view.missing is not None:  # key: over an array
        tree = tree_of_value(view.value, selector=selector, url=urls.of, start=view.start)
        links = _first_page_links(tree, selector) if view.start is None else NO_LINKS
        reader.position = mapped_description(view)
    elif isinstance(view, ValueView) and view.start is not None:
        tree = tree_of_value(view.value, selector=selector, url=urls.of, start=view.start)
        stop = view.start + tree.shown
        total = view.total or 0
        links = range_links(
            without_trailing(selector, Slice), Slice, start=view.start, stop=stop, total=total
        )
        reader.position = f"entries {view.start}..{stop} of {total:,}"
    elif isinstance(view, ValueView):
        tree = tree_of_value(view.value, selector=selector, url=urls.of)
        links = _first_page_links(tree, selector)
        reader.position = _whole_position(tree, view.value)
    else:  # a big blob's first page, from its rendering
        head = facts.head()
        if head is None:  # no rendering to read it from: the indented rows it has
            _raw_json(reader, page, urls)
            reader.note = "This blob is too big to draw as a tree here; it is shown raw."
            return
        total = blob.count or len(head.entries)
        tree = tree_of_entries(head.entries, container=head.container, total=total, url=urls.of)
        links = _first_page_links(tree, selector)
        reader.position = _whole_position(tree, None)
    reader.tree = tree
    reader.links = _pager(links, urls)
    if not tree.complete and (following := links.next):
        reader.tree_more_url = urls.target(following)


def _first_page_links(tree: Tree, selector: Selector) -> PageLinks:
    """A whole array or object whose tree shows its first entries: the next pages are
    `slice:` (or `keys:`) windows of as many after the same selector."""
    if tree.complete or not tree.container:
        return NO_LINKS
    step = Slice if tree.container == "array" else Keys
    return range_links(selector, step, start=0, stop=tree.shown, total=tree.total)


def _whole_position(tree: Tree, value: Any) -> str:
    if tree.container == "array":
        return f"entries 0..{tree.shown} of {tree.total:,}"
    if tree.container == "object":
        return f"keys 0..{tree.shown} of {tree.total:,}"
    return f"a {json_type(value)}" if value is not None else ""


# --- help ----------------------------------------------------------------------------------


def _help(blob: Blob, facts: _Facts) -> SelectorHelp | None:
    count = blob.count or 0
    if blob.kind == "text":
        return text_help(count)
    if blob.kind == "json_array":
        return array_help(count, facts.first_entry_key())
    if blob.kind == "json_object":
        return object_help(facts.keys(), count)
    if blob.kind == "json_string":
        return string_help()
    if blob.kind:
        return scalar_help(blob.kind)
    return None


class _Facts:
    """What the reader may read of a JSON blob, read at most once a request: its first
    top-level entries (the rendering's head, for a big blob) and an object's keys."""

    def __init__(self, blob: Blob, store: BlobStore, whole: Any = None) -> None:
        self.blob = blob
        self.store = store
        self.whole = whole
        self._head: Head | None = None
        self._head_read = False

    def head(self) -> Head | None:
        if not self._head_read:
            self._head_read = True
            with contextlib.suppress(BlobStoreError), renderings().open_sync(self.blob.id) as it:
                self._head = rendered_head(it, limit=max(TOP_CHILDREN, COMPLETIONS))
        return self._head

    def first_entry_key(self) -> str | None:
        """An array blob's first entry's first key, when that entry is an object: from the
        value the page holds, or the start of the blob's rendering (never a load)."""
        value = self.whole
        if value is None:
            head = self._head if self._head_read else self._first_entry()
            value = [v for _, v in head.entries[:1]] if head and head.container == "array" else None
        first = value[0] if isinstance(value, list) and value else None
        return next(iter(first), None) if isinstance(first, dict) else None

    def _first_entry(self) -> Head | None:
        """The rendering's first entry alone (a page with a selector reads no more of it)."""
        with contextlib.suppress(BlobStoreError), renderings().open_sync(self.blob.id) as it:
            return rendered_head(it, limit=1, max_bytes=FIRST_ENTRY_BYTES)
        return None

    def keys(self) -> list[tuple[str, str]]:
        """The first COMPLETIONS keys of an object blob and their values' shapes: from the
        value the page holds, a small blob's value, or a big one's rendering."""
        value = self.whole
        if value is None and (self.blob.size or 0) <= SMALL_JSON:
            try:
                content = self.store.load_sync(self.blob.id)
            except BlobStoreError:
                return []
            if not isinstance(content, Structured):
                return []
            value = content.value
        if isinstance(value, dict):
            return [(k, shape(v)) for k, v in itertools.islice(value.items(), COMPLETIONS)]
        head = self.head()
        if head is None or head.container != "object":
            return []
        return [
            (str(k), f"{v.kind}" if isinstance(v, TooBig) else shape(v))
            for k, v in head.entries[:COMPLETIONS]
        ]


# --- URLs ----------------------------------------------------------------------------------


class _Urls:
    """URLs of views of this blob: a selector (and a start row), in the same mode."""

    def __init__(self, base_url: str, selector: str, *, raw: bool) -> None:
        self.base_url = base_url
        self.selector = selector
        self.raw = raw

    def of(self, selector: str, start: int | None = None, *, raw: bool | None = None) -> str:
        query = QueryDict(mutable=True)
        if selector:
            query["selector"] = selector
        if start and start > 1:
            query["start"] = str(start)
        if self.raw if raw is None else raw:
            query[RAW_PARAM] = "raw"
        return f"{self.base_url}?{query.urlencode()}" if query else self.base_url

    def target(self, target: Target) -> str:
        selector = self.selector if target.selector is None else target.selector
        return self.of(selector, target.start)


def _pager(
    links: PageLinks, urls: _Urls, rels: tuple[str, ...] = ("first", "prev", "next", "last")
) -> list[PagerLink]:
    if not links.any:
        return []
    out = []
    for rel in rels:
        target = getattr(links, rel)
        out.append(PagerLink(rel, _PAGER_LABELS[rel], urls.target(target) if target else ""))
    return out
