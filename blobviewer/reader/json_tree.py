"""JSON as a tree, the way Firefox's JSON viewer shows it: nested `<details>` that open and
close without JavaScript, keys and values in their own colours (CSS classes), each
container with its shape as summaries write it (`array[120]`, `object{17}`; see
docs/promotion.md#content-kinds), long strings
cut with "… N more bytes".

A tree is a flat list of nodes (open a container, a leaf, close it, "… N more"), which a
template renders in one loop with Django's escaping; nothing here builds HTML. Every key
or index whose value a selector can reach links to that selector, built on the current
one (`key:items` → `key:items | slice:3..4`). Selectors reach a value through keys and at
most one index (`slice:` gives an array, and `key:` over an array takes that key of each
entry: `key:items | slice:3..4 | key:name`), so an index below an entry has no link.

The tree is bounded: TREE_BUDGET bytes of HTML, NESTED_CHILDREN children of a nested
container (then "… N more", linked to the `slice:` or `keys:` that reads on), no deeper
than MAX_DEPTH. Only the top level is paged; its first `shown` entries are in the tree.

`rendered_head` reads the first top-level entries of a big JSON blob from the start of its
indented rendering in `derived/`, so its first page needs neither the whole blob nor an
index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape

from core.content import utf8_size
from core.json_values import JsonError, display_key, dumps_compact, json_type, parse_json, shape
from core.selectors import Key, Keys, Selector, Slice, escape_surrogates
from core.store import BlobReader

TREE_BUDGET = 100_000  # bytes of HTML the tree's nodes may take
TOP_CHILDREN = 1_000  # top-level entries at most (the budget usually stops sooner)
NESTED_CHILDREN = 50  # children shown of a container below the top, then "… N more"
MAX_DEPTH = 12  # deeper containers show their shape and a link, not their children
OPEN_DEPTH = 2  # containers this close to the top start open...
OPEN_SIBLINGS = 25  # ...when they have no more siblings than this (else a list of previews)
STRING_CHARS = 200  # a longer string is cut, with "… N more bytes"
PREVIEW_CHARS = 72  # of a container's compact JSON, shown beside its shape while closed
# Markup around each kind of node beyond its texts and link (tags, classes, attributes).
_COST = {"open": 110, "leaf": 70, "close": 26, "more": 90, "big": 90}
# Reserved so that closing every open container and saying what was left out always fits.
_RESERVE = 2_000


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One row of the tree, in document order.

    - "open": a container starts (`<details>`), with *shape* and *text*, the start of
      its compact JSON (shown while it is closed); "close" ends it;
    - "leaf": a scalar, its JSON text *text* in class *css* (str, num, bool, null); a cut
      string has *more_bytes* and its *shape*;
    - "big": a value too big to preview (only in a big blob's first page), *text* says so;
    - "more": *text* says what is not shown; *href* reads on from there (may be "").

    *label* is the key (shown as the key lines show it) or the index, "" at the top of a
    scalar; *href* is the selector URL of the value, "" when no selector reaches it.
    """

    kind: str
    label: str = ""
    index: bool = False
    href: str = ""
    shape: str = ""
    text: str = ""
    css: str = ""
    more_bytes: int = 0
    open: bool = False


@dataclass(frozen=True, slots=True)
class Tree:
    """The nodes, and how many of the *total* top-level entries (or keys) they show."""

    nodes: list[TreeRow]
    shown: int
    total: int
    container: str  # "array", "object", or "" for a scalar

    @property
    def complete(self) -> bool:
        return self.shown >= self.total


# Where a value can be reached from: a selector, or None. `in_slice` marks a value reached
# through an index (`slice:i..i+1`): `key:` goes on into it (over the one entry, giving
# an array of one value), another index cannot (a slice of that array is not the inner one).
@dataclass(frozen=True, slots=True)
class _Reach:
    selector: Selector
    in_slice: bool = False

    def key(self, name: str) -> _Reach | None:
        return _Reach(self.selector.then(Key(name)), self.in_slice)

    def index(self, i: int) -> _Reach | None:
        if self.in_slice:
            return None
        return _Reach(self.selector.then(Slice(i, i + 1)), in_slice=True)


@dataclass(frozen=True, slots=True)
class TooBig:
    """A top-level value of a big blob that did not fit in what was read of it; *kind*
    is its JSON type as far as its first character tells."""

    kind: str


def tree_of_value(
    value: Any,
    *,
    selector: Selector,
    url: Callable[[str], str],
    start: int | None = None,
    budget: int = TREE_BUDGET,
) -> Tree:
    """The tree of a selected *value* (the view of *selector*); *url* makes a selector's
    URL. With *start*, *value* is a slice: entries *start*.. of a bigger array, whose own
    entries are reached by replacing that slice."""
    if isinstance(value, list):
        if start is None:
            reach = _Reach(selector)
            entries: Iterable[tuple[Any, Any, _Reach | None]] = (
                (i, item, reach.index(i)) for i, item in enumerate(value)
            )
        else:
            base = _Reach(_without_slices(selector))
            entries = ((start + i, item, base.index(start + i)) for i, item in enumerate(value))
        return _top(entries, len(value), "array", url, budget)
    if isinstance(value, dict):
        reach = _Reach(selector)
        pairs = ((k, v, reach.key(k)) for k, v in value.items())
        return _top(pairs, len(value), "object", url, budget)
    builder = _Builder(url, budget)
    builder.value("", False, value, None, depth=0)
    return Tree(builder.nodes, 1, 1, "")


def tree_of_entries(
    entries: list[tuple[int | str, Any]],
    *,
    container: str,
    total: int,
    url: Callable[[str], str],
    budget: int = TREE_BUDGET,
) -> Tree:
    """The tree of the first top-level *entries* of a whole blob (an array's indexes or an
    object's keys with their values, or TooBig) that holds *total* of them."""
    reach = _Reach(Selector())
    rows = (
        (label, value, reach.index(label) if isinstance(label, int) else reach.key(label))
        for label, value in entries
    )
    return _top(rows, total, container, url, budget)


def tree_of_keys(
    keys: list[tuple[str, str]],
    *,
    start: int,
    total: int,
    selector: Selector,
    url: Callable[[str], str],
    budget: int = TREE_BUDGET,
) -> Tree:
    """Key lines (name and shape, from `keys:`: keys *start*.. of an object of *total*)
    as a tree of unopened values, each key linked to its value (`key:name` after the
    steps before the `keys:`). Its `shown` and `total` count within these key lines."""
    base = _strip_trailing(selector, Keys)
    builder = _Builder(url, budget)
    shown = 0
    for name, value_shape in keys:
        if builder.exhausted:
            break
        href = url(str(base.then(Key(name))))
        builder.add(TreeRow("leaf", _key_label(name), href=href, text=value_shape, css="shape"))
        shown += 1
    return Tree(builder.nodes, shown, len(keys), "object")


def _top(
    entries: Iterable[tuple[Any, Any, _Reach | None]],
    total: int,
    container: str,
    url: Callable[[str], str],
    budget: int,
) -> Tree:
    builder = _Builder(url, budget)
    shown = 0
    for label, item, reach in entries:
        if builder.exhausted or shown >= TOP_CHILDREN:
            break
        builder.value(label, isinstance(label, int), item, reach, depth=1, siblings=total)
        shown += 1
    return Tree(builder.nodes, shown, total, container)


class _Builder:
    def __init__(self, url: Callable[[str], str], budget: int) -> None:
        self.nodes: list[TreeRow] = []
        self.url = url
        self.left = budget - _RESERVE

    @property
    def exhausted(self) -> bool:
        return self.left <= 0

    def add(self, node: TreeRow) -> None:
        self.nodes.append(node)
        self.left -= (
            _COST[node.kind] + len(escape(node.label)) + len(escape(node.text)) + len(node.href)
        )

    def href(self, reach: _Reach | None) -> str:
        return self.url(str(reach.selector)) if reach is not None else ""

    def value(
        self,
        label: Any,
        index: bool,
        value: Any,
        reach: _Reach | None,
        *,
        depth: int,
        siblings: int = 1,
    ) -> None:
        shown_label = str(label) if index else _key_label(label) if depth else ""
        href = self.href(reach) if depth else ""
        if isinstance(value, TooBig):
            text = f"{value.kind}, too big to preview here"
            self.add(TreeRow("big", shown_label, index, href, text=text))
        elif isinstance(value, list | dict) and value:
            opened = depth <= OPEN_DEPTH and siblings <= OPEN_SIBLINGS
            self.container(shown_label, index, href, value, reach, depth=depth, opened=opened)
        elif isinstance(value, list | dict):  # nothing to open
            text = "[]" if isinstance(value, list) else "{}"
            self.add(TreeRow("leaf", shown_label, index, href, text=text, css="shape"))
        else:
            self.add(_leaf(shown_label, index, href, value))

    def container(
        self,
        label: str,
        index: bool,
        href: str,
        value: list[Any] | dict[str, Any],
        reach: _Reach | None,
        *,
        depth: int,
        opened: bool,
    ) -> None:
        preview = "" if opened else _preview(value)
        self.add(TreeRow("open", label, index, href, shape=shape(value), text=preview, open=opened))
        is_list = isinstance(value, list)
        items: Iterable[tuple[Any, Any]] = (
            enumerate(value) if isinstance(value, list) else value.items()
        )
        shown = 0
        if depth < MAX_DEPTH:
            for key, item in items:
                if shown >= NESTED_CHILDREN or self.exhausted:
                    break
                child = (
                    (reach.index(key) if is_list else reach.key(key)) if reach is not None else None
                )
                self.value(key, is_list, item, child, depth=depth + 1, siblings=len(value))
                shown += 1
        if shown < len(value):
            self.more(len(value) - shown, shown, len(value), is_list, reach)
        self.add(TreeRow("close"))

    def more(self, left: int, shown: int, total: int, is_list: bool, reach: _Reach | None) -> None:
        noun = ("entry", "entries") if is_list else ("key", "keys")
        text = f"{left:,} more {noun[0] if left == 1 else noun[1]}"
        href = ""
        if reach is not None and not reach.in_slice:
            step = Slice if is_list else Keys
            window = max(1, min(NESTED_CHILDREN, total - shown))
            href = self.url(str(reach.selector.then(step(shown, shown + window))))
        self.add(TreeRow("more", text=text, href=href))


def _leaf(label: str, index: bool, href: str, value: Any) -> TreeRow:
    kind = json_type(value)
    css = {"string": "str", "number": "num", "boolean": "bool", "null": "null"}[kind]
    if kind == "string" and len(value) > STRING_CHARS:
        head = value[:STRING_CHARS]
        text = escape_surrogates(dumps_compact(head))[:-1]  # open: the note says it goes on
        more = utf8_size(value) - utf8_size(head)
        return TreeRow(
            "leaf", label, index, href, shape=shape(value), text=text, css=css, more_bytes=more
        )
    return TreeRow(
        "leaf", label, index, href, text=escape_surrogates(dumps_compact(value)), css=css
    )


class _Full(Exception):
    pass


def _preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """The start of *value*'s compact JSON, at most *limit* characters (then "…"); it
    walks only as much of the value as it shows, however big the value is."""
    parts: list[str] = []
    left = limit + 1

    def emit(text: str) -> None:
        nonlocal left
        parts.append(text[:left])
        left -= len(text)
        if left <= 0:
            raise _Full

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            emit("{")
            for i, (key, child) in enumerate(item.items()):
                emit(("," if i else "") + dumps_compact(str(key)[:left]) + ":")
                walk(child)
            emit("}")
        elif isinstance(item, list):
            emit("[")
            for i, child in enumerate(item):
                if i:
                    emit(",")
                walk(child)
            emit("]")
        elif isinstance(item, str):
            emit(dumps_compact(item[:left]) if len(item) > left else dumps_compact(item))
        else:
            emit(dumps_compact(item))

    try:
        walk(value)
    except _Full:
        return escape_surrogates("".join(parts)[:limit]) + "…"
    return escape_surrogates("".join(parts))


def _key_label(name: Any) -> str:
    return escape_surrogates(display_key(str(name)))


def _strip_trailing(selector: Selector, kind: type) -> Selector:
    steps = list(selector.steps)
    while steps and isinstance(steps[-1], kind):
        steps.pop()
    return Selector(tuple(steps))


def _without_slices(selector: Selector) -> Selector:
    return _strip_trailing(selector, Slice)


# --- the first page of a big blob, from its indented rendering -----------------------------

HEAD_BYTES = 1 << 20  # read at most this much of a rendering for a first page
_INDENT = b"  "


@dataclass(frozen=True, slots=True)
class Head:
    """The first top-level entries of a JSON value read from its indented rendering:
    (index or key, value) pairs, the last one possibly TooBig."""

    container: str  # "array" or "object"
    entries: list[tuple[int | str, Any]]


def rendered_head(rendering: BlobReader, *, limit: int, max_bytes: int = HEAD_BYTES) -> Head | None:
    """The first (up to *limit*) top-level entries of the array or object whose indented
    rendering (`dumps_indented`: two spaces a level, one key or entry a line) *rendering*
    reads, reading at most *max_bytes* of it. An entry not complete within them is TooBig
    and ends the list. None when it cannot be read or holds no array or object.

    Strings are JSON-escaped in the rendering, so no line break falls inside one: a line
    indented by exactly one level, not closing a container, starts a top-level entry.
    """
    try:
        data = rendering.read(0, max_bytes + 1)
    except OSError:
        return None
    whole = len(data) <= max_bytes
    lines = data[:max_bytes].split(b"\n")
    if not whole:
        lines.pop()  # the last line may be cut mid-way
    if not lines or lines[0] not in (b"[", b"{", b"[]", b"{}"):
        return None
    container = "array" if lines[0].startswith(b"[") else "object"
    entries: list[tuple[int | str, Any]] = []
    current: list[bytes] = []
    for line in lines[1:]:
        starts = line.startswith(_INDENT) and line[2:3] not in (b" ", b"}", b"]", b"")
        if (starts or line in (b"]", b"}")) and current:
            entry = _entry(current, container, len(entries))
            if entry is None:
                return Head(container, entries)
            entries.append(entry)
            current = []
            if len(entries) >= limit:
                return Head(container, entries)
        if starts:
            current = [line]
        elif current:
            current.append(line)
    if current:  # not complete within what was read
        rest: bytes | None = current[0][2:]
        label: int | str | None = len(entries)
        if container == "object":
            label, rest = _split_key(current[0])
        if label is not None and rest is not None:
            kind = {b"{": "object", b"[": "array", b'"': "string"}.get(rest[:1], "value")
            entries.append((label, TooBig(kind)))
    return Head(container, entries)


def _entry(lines: list[bytes], container: str, index: int) -> tuple[int | str, Any] | None:
    text = b"\n".join(lines).rstrip()
    if text.endswith(b","):
        text = text[:-1]
    try:
        if container == "array":
            return index, parse_json(text)
        pair = parse_json(b"{" + text + b"}")
    except JsonError:
        return None
    if not isinstance(pair, dict) or len(pair) != 1:
        return None
    ((key, value),) = pair.items()
    return key, value


def _split_key(line: bytes) -> tuple[str | None, bytes | None]:
    """The key that starts an object's entry line (`  "key": value`), and what follows."""
    try:
        text = line[2:].decode("utf-8", "surrogatepass")
        key, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, UnicodeDecodeError):
        return None, None
    if not isinstance(key, str) or not text.startswith(": ", end):
        return None, None
    return key, text[end + 2 :].encode("utf-8", "surrogatepass")
