"""Selectors evaluated through a blob's index: what a selector reaches, found by reading
a few index records, so that only what is then shown is read from the blob.

:func:`select` takes the steps in turn as core.selectors.apply_steps does, but over
stand-ins that name a part of the blob without holding it: a range of lines of a text
(:class:`TextLines`), a value's span (:class:`Whole`), a range of an array's entries
(:class:`Entries`) or of an object's key lines (:class:`KeyRange`); `key:` over such an
array reads its entries one at a time and keeps only that key's values. A step the index
cannot take (a part without a table of its own, e.g. a string reached by `key:`) reads
that part, parses it and goes on with core.selectors on the value; `grep:` over a text
reads the lines it searches from where the index says the first one starts. Every error
comes from core.selectors itself, raised on a stand-in view of the same kind, so the
messages are those of core.selectors.evaluate on the whole value byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from core.grep import Page, blob_blocks
from core.selectors import (
    DEFAULT_GREP_PAGE,
    Grep,
    GrepView,
    Key,
    Keys,
    KeysView,
    Lines,
    LinesView,
    Selector,
    Slice,
    Step,
    ValueView,
    View,
    apply_step,
    grep_blocks,
    mapped,
    missing_key,
)
from core.store.base import BlobStore
from core.store.blob_id import BlobId
from core.store.errors import BlobCorrupt, BlobIOError, BlobStoreError, IndexUnusable
from core.store.index import index_in_memory, open_index
from core.store.index.json_reader import JsonIndex, Node
from core.store.index.text_index import TextIndex


class NotIndexed(Exception):
    """What was reached is read another way (a range of a text's lines: through the text
    index's own reads, see :func:`materialize`)."""


@dataclass(frozen=True, slots=True)
class TextLines:
    """Lines *first*..*last* of the text blob, which has *total* lines."""

    first: int
    last: int
    total: int


@dataclass(frozen=True, slots=True)
class Whole:
    """A whole JSON value: the blob's, or one reached by `key:`."""

    node: Node


@dataclass(frozen=True, slots=True)
class Entries:
    """Entries *start*..*stop*-1 of the array *node*, which has *total* entries."""

    node: Node
    start: int
    stop: int
    total: int


@dataclass(frozen=True, slots=True)
class KeyRange:
    """Key lines *start*..*stop*-1 of the object *node*, which has *total* keys."""

    node: Node
    start: int
    stop: int
    total: int


Reached = TextLines | Whole | Entries | KeyRange | View


def whole_blob(index: TextIndex | JsonIndex) -> TextLines | Whole:
    if isinstance(index, TextIndex):
        total = index.line_count
        return TextLines(1, total, total)
    return Whole(index.root())


def select(
    index: TextIndex | JsonIndex, selector: Selector, *, grep_page: Page = DEFAULT_GREP_PAGE
) -> Reached:
    """Where *selector* leads in the blob; raises SelectorError as evaluate would. A
    `grep:` step stops once its matches fill *grep_page*."""
    state: Reached = whole_blob(index)
    for number, step in enumerate(selector.steps):
        reached = "this blob" if number == 0 else str(Selector(selector.steps[:number]))
        state = _take_step(index, step, state, reached, grep_page)
    return state


def _take_step(
    index: TextIndex | JsonIndex, step: Step, state: Reached, reached: str, grep_page: Page
) -> Reached:
    if isinstance(state, TextLines):
        view = LinesView("", state.first, state.last, state.total)
        if isinstance(step, Lines):  # the text-less view gives core's numbers and errors
            narrowed = apply_step(step, view, reached=reached)
            assert isinstance(narrowed, LinesView)
            return TextLines(narrowed.first, narrowed.last, narrowed.total)
        if isinstance(step, Grep):
            assert isinstance(index, TextIndex)
            return _grep_lines(index, state, step, grep_page)
        _refuse(step, view, reached)
    if isinstance(state, Entries):
        if isinstance(step, Slice):  # narrowing: indexes count in the whole array
            start, stop = step.bounds(state.total)
            start, stop = max(start, state.start), min(stop, state.stop)
            return Entries(state.node, start, max(stop, start), state.total)
        if isinstance(step, Key):  # that key of each entry: read one entry at a time
            entries = _entries(index, state.node, state.start, state.stop)
            return mapped(step, entries, start=state.start, total=state.total)
        in_view = (
            [_first_entry_stand_in(index, state.node, state.start)]
            if state.stop > state.start
            else []
        )
        _refuse(step, ValueView(in_view, start=state.start, total=state.total), reached)
    if isinstance(state, KeyRange):
        if isinstance(step, Keys):
            start, stop = step.bounds(state.total)
            start, stop = max(start, state.start), min(stop, state.stop)
            return KeyRange(state.node, start, max(stop, start), state.total)
        _refuse(step, KeysView([], state.start, state.total), reached)
    if isinstance(state, Whole):
        assert isinstance(index, JsonIndex)
        node = state.node
        table = node.table
        if table is None:  # small, or deeper than the index goes: read it whole
            whole = ValueView(index.value(node))
            return apply_step(step, whole, reached=reached, grep_page=grep_page)
        if node.kind == "array" and isinstance(step, Slice):
            start, stop = step.bounds(node.count)
            return Entries(node, start, max(stop, start), node.count)
        if node.kind == "object" and isinstance(step, Keys):
            start, stop = step.bounds(node.count)
            return KeyRange(node, start, max(stop, start), node.count)
        if node.kind == "array" and isinstance(step, Key):
            return mapped(step, _entries(index, node, 0, node.count))
        if node.kind == "object" and isinstance(step, Key):
            found = index.find(table, step.name)
            if found is None:
                first = index.key_names(table, 0, min(10, node.count))
                raise missing_key(step, (name for name, _ in first), node.count)
            return Whole(found)
        _refuse(step, stand_in(index, node), reached)
    return apply_step(step, state, reached=reached, grep_page=grep_page)


def _entries(index: TextIndex | JsonIndex, node: Node, start: int, stop: int) -> Iterator[Any]:
    """Entries *start*..*stop*-1 of the indexed array *node*, read and parsed one at a time."""
    assert isinstance(index, JsonIndex) and node.table is not None
    for begin, end in index.spans(node.table, start, stop):
        yield index.value(Node("", 0, begin, end))


def _grep_lines(index: TextIndex, lines: TextLines, step: Grep, page: Page) -> GrepView:
    """`grep:` over lines first..last of the text blob, read from the start of the first."""
    blocks = blob_blocks(index.blob, start=index.line_start(lines.first))
    first, last, total = lines.first, lines.last, lines.total
    return grep_blocks(step, blocks, first=first, last=last, total=total, page=page)


def stand_in(index: JsonIndex, node: Node) -> ValueView:
    """A small view of the same kind as *node*, for core's error messages: what kind it
    is and which selectors fit it (an object's names its first key)."""
    if node.table is None:
        return ValueView(index.value(node))
    if node.kind == "array":  # its first entry, as far as the suggestions look at it
        return ValueView([_first_entry_stand_in(index, node, 0)] if node.count else [])
    first = next(index.key_names(node.table, 0, min(1, node.count)), None)
    return ValueView({} if first is None else {first[0]: None})


def _first_entry_stand_in(index: TextIndex | JsonIndex, node: Node, at: int) -> Any:
    """Entry *at* of the indexed array *node*, as far as core's suggestions read an
    array's first entry (an object's first key): `{name: None}` for an object, None for
    anything else. Its compact text's first bytes tell, unless the key is longer."""
    assert isinstance(index, JsonIndex) and node.table is not None
    begin, end = next(index.spans(node.table, at, at + 1))
    head = index.compact(begin, end, 1024)
    if not head.text.startswith('{"'):
        return None
    try:
        name, _ = json.JSONDecoder().raw_decode(head.text, 1)
    except ValueError:  # a longer key than the bytes read: read the entry
        entry = index.value(Node("", 0, begin, end))
        return {next(iter(entry)): None}
    return {name: None}


def _refuse(step: Step, view: View, reached: str) -> NoReturn:
    """Raise core's error for *step* on *view*, which is of a kind the step misfits."""
    apply_step(step, view, reached=reached)
    raise IndexUnusable(f"{step} was expected to misfit {type(view).__name__}")


def selected_view(
    store: BlobStore,
    blob_id: BlobId | str,
    selector: Selector,
    *,
    grep_page: Page = DEFAULT_GREP_PAGE,
) -> View:
    """The view core.selectors.evaluate gives for *selector* on the stored blob, read
    through the blob's index: the one its store keeps (only what the selector reaches is
    read), else one built in memory once the blob is loaded. For callers that page a view
    themselves, like the web viewer. A range of a text's lines (a selector of `lines:` steps
    only) raises NotIndexed: the caller reads those lines through the text index.

    Raises SelectorError as evaluate would; the store's errors (BlobCorrupt for a text that
    is not UTF-8, BlobIOError for a read that fails)."""
    index: TextIndex | JsonIndex | None = None
    try:
        index = open_index(store, blob_id, min_bytes=store.index_min_bytes)
        if index is not None:
            with index:
                return materialize(index, select(index, selector, grep_page=grep_page))
    except IndexUnusable:
        pass  # stale or damaged after all: the loaded blob has the answer
    except UnicodeDecodeError as error:
        if isinstance(index, TextIndex):
            raise BlobCorrupt(f"blob {blob_id} is not UTF-8: {error.reason}") from None
        # a damaged JSON blob: loading it names the damage
    except OSError as error:
        if isinstance(error, BlobStoreError):
            raise
        raise BlobIOError(f"cannot read blob {blob_id}: {error.strerror}") from None
    with index_in_memory(store.load_sync(blob_id)) as loaded:
        return materialize(loaded, select(loaded, selector, grep_page=grep_page))


def materialize(index: TextIndex | JsonIndex, state: Reached) -> View:
    """The view core.selectors.evaluate gives for the same selector, read from the spans
    that *state* names (for callers that page a view themselves, like the web viewer).
    A text range is left to the caller, who reads its lines through the index."""
    if isinstance(state, TextLines):
        raise NotIndexed("a range of lines is read through the text index")
    if not isinstance(state, Whole | Entries | KeyRange):
        return state
    assert isinstance(index, JsonIndex)
    if isinstance(state, Whole):
        return ValueView(index.value(state.node))
    if isinstance(state, Entries):
        assert state.node.table is not None
        spans = index.spans(state.node.table, state.start, state.stop)
        values = [index.value(Node("", 0, start, end)) for start, end in spans]
        return ValueView(values, state.start, state.total)
    assert state.node.table is not None  # a KeyRange
    names = index.key_names(state.node.table, state.start, state.stop)
    return KeysView([(name, node.shape) for name, node in names], state.start, state.total)
