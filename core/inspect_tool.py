"""The built-in `inspect` tool: what the model reads of a stored blob (SPEC 2.8).

The result starts with a header line `[blob:<id>] ...`, then the selected content, and
never exceeds ``policy.inspect_limit`` bytes: it stops at the last whole line that fits
and ends with `… truncated — continue with <selector>`, naming the exact next selector.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from core.agent.policy import DEFAULT_POLICY, Policy
from core.agent.tools import ToolError
from core.content import (
    Content,
    Inline,
    Structured,
    Text,
    ToolOutput,
    cut_utf8,
    decode_text,
    encode_text,
    utf8_size,
)
from core.grep import LINE_CAP, blob_blocks, count_lines_in
from core.grep import Page as GrepPage
from core.grep import search as grep_search
from core.json_values import (
    display_key,
    dumps_compact,
    dumps_for_storage,
    dumps_indented,
    json_type,
    shape,
)
from core.selectors import (
    Grep,
    GrepView,
    Key,
    Keys,
    KeysView,
    Lines,
    LinesView,
    Selector,
    SelectorError,
    Slice,
    Step,
    ValueView,
    apply_steps,
    evaluate,
    explain,
    key_line,
    parse_selector,
)
from core.store import BlobStore
from core.store.blob_id import BlobId, parse_blob_id
from core.store.errors import BlobStoreError
from core.store.index import IndexedLine, IndexUnusable, JsonIndex, TextIndex, open_index
from core.store.index.json_index import Node, Shown, Table
from core.store.index.selection import (
    Entries,
    KeyRange,
    NotIndexed,
    TextLines,
    Whole,
    select,
    stand_in,
)
from core.summary import ELLIPSIS, key_lines, schema_line

INSPECT_NAME = "inspect"
INSPECT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "blob_id": {
            "type": "string",
            "description": "The id in a [blob:<id>] reference, e.g. 0190f5e2-...",
        },
        "selector": {
            "type": "string",
            "description": "Which part to read; omit it for an overview. See the description.",
        },
    },
    "required": ["blob_id"],
    "additionalProperties": False,
}
INSPECT_DESCRIPTION = """\
Read a stored tool output. Large tool outputs are not put in the conversation: you see a \
summary that starts with [blob:<id>]. Call inspect with that id to read more of it.
Without a selector you get the kind, size and beginning of the blob. Selectors:
- lines:20-50  lines 20 to 50 of a text (numbered from 1); lines:20 one line; lines:20- to the end
- slice:3..8   entries 3 to 7 of a JSON array (from 0, end excluded); also 3.. ..8 3..=8
- key:results  the value of one key of a JSON object; key:"a|b" quotes a key with | in it
- keys:40..80  key lines 40 to 79 of a JSON object (name and shape), paged like slice:
- grep:regex   the lines of a text that match an RE2 regex, as <line number>: <line>; RE2 has \
no backreferences and no lookaround; a page of matches ends with the selector that reads on
Chain steps with |, e.g. key:results | slice:0..5  or  key:log | grep:ERROR  or \
lines:100-200 | grep:def . Results are capped at about 8 KB; a cut result ends with \
"continue with <selector>" naming the selector that reads on."""


class InspectError(Exception):
    """Unknown or malformed blob id, missing blob, or a bad selector; one-line message."""


async def inspect_blob_async(
    store: BlobStore, blob_id: str, selector: str | None = None, policy: Policy = DEFAULT_POLICY
) -> str:
    """What the inspect tool returns for *blob_id* and *selector*; raises InspectError."""
    parsed_id, parsed = _parse(blob_id, selector)
    if isinstance(store, BlobStore):  # it reads by range (a bare async store only loads)
        args = (store, parsed_id, parsed, policy)
        if (result := await asyncio.to_thread(_from_file, *args)) is not None:
            return result
    try:
        content = await store.load(parsed_id)
    except BlobStoreError as error:
        raise InspectError(str(parsed if isinstance(parsed, SelectorError) else error)) from None
    return _render_or_raise(parsed_id, content, parsed, policy)


def inspect_blob(
    store: BlobStore, blob_id: str, selector: str | None = None, policy: Policy = DEFAULT_POLICY
) -> str:
    """:func:`inspect_blob_async` for synchronous callers (the CLI, the web site)."""
    parsed_id, parsed = _parse(blob_id, selector)
    if (result := _from_file(store, parsed_id, parsed, policy)) is not None:
        return result
    try:
        content = store.load_sync(parsed_id)
    except BlobStoreError as error:
        raise InspectError(str(parsed if isinstance(parsed, SelectorError) else error)) from None
    return _render_or_raise(parsed_id, content, parsed, policy)


def _parse(blob_id: str, selector: str | None) -> tuple[BlobId, Selector | SelectorError]:
    """The blob id (or InspectError), and the selector or why it does not parse: that
    error is raised once the blob is loaded, so it can say which selectors fit it (or
    as it is, when the blob cannot be loaded)."""
    try:
        parsed_id = parse_blob_id(blob_id)
    except BlobStoreError as error:
        raise InspectError(str(error)) from None
    try:
        return parsed_id, parse_selector(selector)
    except SelectorError as error:
        return parsed_id, error


def _from_file(
    store: BlobStore, blob_id: BlobId, selector: Selector | SelectorError, policy: Policy
) -> str | None:
    """The result read from the blob by range without loading the blob: `grep:` over a text
    streamed (core.grep), anything else through the blob's index; None: load it instead."""
    if (result := _grep_from_file(store, blob_id, selector, policy)) is not None:
        return result
    return _through_index(store, blob_id, selector, policy)


def _through_index(
    store: BlobStore, blob_id: BlobId, selector: Selector | SelectorError, policy: Policy
) -> str | None:
    """The result read through the blob's index (core.store.index): the index finds what the
    selector reaches, and only what is shown is read. The same text as
    :func:`render_inspect` gives for the loaded blob; None when the blob is to be loaded
    instead (no index helps, or it turned out stale or damaged)."""
    try:
        index = open_index(store, blob_id, min_bytes=store.index_min_bytes)
    except (BlobStoreError, OSError):
        return None  # loading it says what is wrong
    if index is None:
        return None
    try:
        with index:
            return _render_indexed(blob_id, index, selector, policy)
    except (NotIndexed, IndexUnusable):
        return None
    except SelectorError as error:
        raise InspectError(str(error)) from None
    except UnicodeDecodeError:
        if isinstance(index, JsonIndex):
            return None  # loading it names the damage
        raise InspectError(f"blob {blob_id} is not UTF-8 text") from None
    except OSError as error:
        raise InspectError(f"cannot read blob {blob_id}: {error.strerror}") from None


def _render_or_raise(
    blob_id: BlobId, content: Content, selector: Selector | SelectorError, policy: Policy
) -> str:
    if isinstance(selector, SelectorError):
        raise InspectError(explain(selector, content))
    try:
        return render_inspect(blob_id, content, selector, policy)
    except SelectorError as error:
        raise InspectError(str(error)) from None


# -- rendering ------------------------------------------------------------------------------


# The selector that resumes an output at a unit: only ever written out (in a trailer), so
# a run of numbered units gives it as text made cheaply (_resumes) rather than a Selector.
Resume = Selector | str


class _Unit(NamedTuple):  # a NamedTuple: made by the hundred for every call
    """A run of output lines that is kept or dropped whole, and the selector that resumes
    the output at it. A single-line unit that alone exceeds the limit is cut."""

    lines: list[str]
    resume: Resume | None
    label: str = "line"  # how the note on a cut line names it
    size: int | None = None  # a one-line unit's full size when `lines` holds only its start


def _unit_size(unit: _Unit) -> int:
    """The bytes *unit* takes in the output, its newline included."""
    lines = unit.lines
    if unit.size is not None:
        return 1 + unit.size
    if len(lines) == 1:
        return 1 + utf8_size(lines[0])
    return sum(1 + utf8_size(line) for line in lines)


def _resumes(prefix: Selector, step: Callable[[int], Step]) -> Callable[[int], str]:
    """The resume selector of numbered unit n, `prefix | step(n)`, as text: the prefix is
    written once for the whole run."""
    head = f"{prefix} | " if prefix else ""
    return lambda n: head + str(step(n))


def render_inspect(
    blob_id: BlobId, content: Content, selector: Selector | str | None, policy: Policy
) -> str:
    """The inspect result for *content*; raises SelectorError for a selector that misfits."""
    if not isinstance(selector, Selector):
        selector = parse_selector(selector)
    ref = f"[blob:{blob_id}]"
    if not selector:
        header, units, more = _overview(ref, content, policy)
    else:
        view = evaluate(selector, content, grep_page=_grep_page(ref, selector, policy))
        description, units = _selected(view, selector)
        name = "" if len(selector.steps) == 1 else f"{selector} → "
        header, more = f"{ref} {name}{description}", _grep_more(view, selector)
    return _bounded(_cap(header, units, more, policy.inspect_limit), policy.inspect_limit)


def _overview(ref: str, content: Content, policy: Policy) -> tuple[str, list[_Unit], str | None]:
    head = policy.inspect_head_lines
    if isinstance(content, Text):
        text = content.text
        view = evaluate(None, content)
        assert isinstance(view, LinesView)
        header = f"{ref} text | {view.total} lines | {utf8_size(text)} bytes"
        shown = min(head, view.total)
        resume = _resumes(Selector(), lambda n: Lines(n, shown))
        units = [_Unit([line], resume(n)) for n, line in view.numbered(1, shown)]
        more = None
        if view.total > shown:
            more = f"{ELLIPSIS} {view.total - shown} more lines — continue with " + str(
                Lines(shown + 1, min(view.total, 2 * shown) or None)
            )
        return header, units, more
    assert isinstance(content, Structured)
    value = content.value
    size = len(dumps_for_storage(value))
    if isinstance(value, list):
        header = f"{ref} json_array | {len(value)} entries | {size} bytes"
        shown = min(head, len(value))
        units = [
            _Unit(["── schema ──", schema_line(value[0], 1 << 20) if value else "(empty)"], None)
        ]
        if value:
            resume = _resumes(Selector(), lambda i: Slice(i, shown))
            units.append(_Unit(["── head ──"], resume(0)))
            units += [
                _Unit([dumps_compact(item)], resume(i), "entry")
                for i, item in enumerate(value[:shown])
            ]
        more = None
        if len(value) > shown:
            more = f"{ELLIPSIS} {len(value) - shown} more entries — continue with " + str(
                Slice(shown, min(len(value), 2 * shown))
            )
        return header, units, more
    if isinstance(value, dict):
        header = f"{ref} json_object | {len(value)} keys | {size} bytes"
        units = [_Unit(["── keys ──"], None)]
        # A cut list of key lines goes on with the next key lines, not one key's value.
        resume = _resumes(Selector(), lambda i: Keys(i, None))
        units += [_Unit([line], resume(i), "key line") for i, line in enumerate(key_lines(value))]
        return header, units, None
    header = f"{ref} json_{json_type(value)} | {size} bytes"
    return header, [_Unit([dumps_compact(value)], None, "value")], None


def _selected(view: Any, selector: Selector) -> tuple[str, list[_Unit]]:
    steps = selector.steps
    prefix = Selector(steps[:-1])
    last = steps[-1]
    if isinstance(view, LinesView):
        assert isinstance(last, Lines)
        description = f"lines {view.first}-{view.last} of {view.total}"
        resume = _resumes(prefix, lambda n: Lines(n, last.end))
        return description, [_Unit([line], resume(n)) for n, line in view.numbered()]
    if isinstance(view, GrepView):
        return _grep_description(view), _grep_units(view, selector)
    if isinstance(view, KeysView):
        assert isinstance(last, Keys)
        description = f"keys {view.start}..{view.start + len(view.keys)} of {view.total} keys"
        end = last.end + int(last.inclusive) if last.end is not None else None
        resume = _resumes(prefix, lambda n: Keys(n, end))
        return description, [
            _Unit([line], resume(view.start + i), "key line") for i, line in enumerate(view.lines())
        ]
    assert isinstance(view, ValueView)
    if isinstance(last, Slice):
        start = view.start or 0
        stop = start + len(view.value)
        description = f"slice {start}..{stop} of {view.total} entries"
        end = last.end + int(last.inclusive) if last.end is not None else None
        resume = _resumes(prefix, lambda n: Slice(n, end))
        return description, [
            _Unit([dumps_compact(item)], resume(start + i), "entry")
            for i, item in enumerate(view.value)
        ]
    assert isinstance(last, Key)
    value = view.value
    description = f"key {display_key(last.name)}: {shape(value)}"
    if isinstance(value, str):
        lines_view = evaluate(Selector((Lines(1, None),)), Text(value)) if value else None
        units = []
        if isinstance(lines_view, LinesView):
            resume = _resumes(selector, lambda n: Lines(n, None))
            units = [_Unit([line], resume(n)) for n, line in lines_view.numbered()]
        return description, units
    return description, _json_units(value, selector)


# -- grep: one page of matches -----------------------------------------------------------------
# A grep step stops once its matches fill what the cap leaves after the header and the
# trailer (core.grep.Page), so every match it found is shown, the header counts exactly
# those, and the trailer goes on after the last line searched: `lines:<B+1>- | grep:...`.

_WIDEST_NUMBER = 10**20  # wider than any line number: room kept for the header and trailer


def _grep_parts(selector: Selector) -> tuple[Selector, int | None, Grep]:
    """The steps before the grep step less a last `lines:` step, that step's end (None: to
    the end), and the grep step; a match resumes at `<steps> | lines:N-<end> | grep:...`."""
    narrowed, last = Selector(selector.steps[:-1]), selector.steps[-1]
    assert isinstance(last, Grep)
    end = None
    if narrowed.steps and isinstance(narrowed.steps[-1], Lines):
        end = narrowed.steps[-1].end
        narrowed = Selector(narrowed.steps[:-1])
    return narrowed, end, last


def _grep_description(view: GrepView, *, widest: bool = False) -> str:
    """`grep <pattern>: <n> matches in lines <A>-<B> of <N>` (N is `?` when nothing counted
    the text's lines), then a note when lines longer than LINE_CAP were searched in part."""
    if view.total == 0 and not widest:
        return f"grep {view.pattern}: 0 matches in an empty text"
    numbers = [len(view.matches), view.first, view.last, "?" if view.total is None else view.total]
    if widest:
        numbers = [_WIDEST_NUMBER] * 4
    count, first, last, total = numbers
    description = f"grep {view.pattern}: {count} matches in lines {first}-{last} of {total}"
    if view.long_lines or widest:
        long_lines = view.long_lines or (_WIDEST_NUMBER, _WIDEST_NUMBER)
        which = f"line {long_lines[0]} is"
        if len(long_lines) > 1:
            which = f"{len(long_lines)} lines (the first: line {long_lines[0]}) are"
        description += (
            f"\n{ELLIPSIS} {which} longer than {LINE_CAP} bytes: "
            f"only the first {LINE_CAP} bytes of each were searched"
        )
    return description


def _grep_units(view: GrepView, selector: Selector) -> list[_Unit]:
    narrowed, end, grep = _grep_parts(selector)
    units = []
    for number, line in view.matches:
        shown = f"{number}: {line}"
        size = view.sizes.get(number)
        units.append(
            _Unit(
                [shown],
                narrowed.then(Lines(number, end), grep),
                "match",
                size=None if size is None else len(f"{number}: ") + size,
            )
        )
    return units


def _grep_more(view: object, selector: Selector) -> str | None:
    """The trailer after a page of matches that ended before the lines searched did."""
    if not isinstance(view, GrepView) or view.complete:
        return None
    narrowed, end, grep = _grep_parts(selector)
    return _trailer(narrowed.then(Lines(view.last + 1, end), grep))


def _grep_page(ref: str, selector: Selector, policy: Policy) -> GrepPage:
    """The page a grep step may fill: the cap less the widest header and trailer."""
    limit = policy.inspect_limit
    if not selector or not isinstance(selector.steps[-1], Grep):
        return GrepPage(max_bytes=limit, line_bytes=limit)
    narrowed, end, grep = _grep_parts(selector)
    widest = GrepView([], grep.pattern, 1, 1, None)
    name = "" if len(selector.steps) == 1 else f"{selector} → "
    header = f"{ref} {name}{_grep_description(widest, widest=True)}"
    trailer = _trailer(narrowed.then(Lines(_WIDEST_NUMBER, end), grep))
    room = limit - utf8_size(header) - 1 - utf8_size(trailer)
    return GrepPage(max_bytes=max(room, 0), line_bytes=limit)


def _grep_from_file(
    store: BlobStore, blob_id: BlobId, selector: Selector | SelectorError, policy: Policy
) -> str | None:
    """`[lines:A-B |]* grep:P` of a text blob, streamed from the store (see grep_blob) and
    rendered as render_inspect renders it; None for other selectors or blobs."""
    if not isinstance(selector, Selector):
        return None
    ref = f"[blob:{blob_id}]"
    try:
        view = grep_blob(store, blob_id, selector, page=_grep_page(ref, selector, policy))
    except SelectorError as error:
        raise InspectError(str(error)) from None
    except UnicodeDecodeError:
        raise InspectError(f"blob {blob_id} is not UTF-8 text") from None
    except OSError as error:
        raise InspectError(f"cannot read blob {blob_id}: {error.strerror}") from None
    if view is None:
        return None
    name = "" if len(selector.steps) == 1 else f"{selector} → "
    header = f"{ref} {name}{_grep_description(view)}"
    units = _grep_units(view, selector)
    more = _grep_more(view, selector)
    return _bounded(_cap(header, units, more, policy.inspect_limit), policy.inspect_limit)


def grep_blob(
    store: BlobStore, blob_id: BlobId, selector: Selector, *, page: GrepPage
) -> GrepView | None:
    """`[lines:A-B |]* grep:P` of a text blob, streamed from its file in blocks (core.grep),
    never loading the blob: the blob's index gives the line count and where line A starts
    (without one, lines are counted on the way). Stops once *page* is full.

    None when the selector is not of that form or the blob is not a text (evaluate the
    loaded blob instead). Raises SelectorError for `lines:` steps that do not fit,
    UnicodeDecodeError for a match that is not UTF-8, OSError when the file cannot be read.
    """
    if not selector:
        return None
    *narrowing, grep = selector.steps
    if not isinstance(grep, Grep) or not all(isinstance(step, Lines) for step in narrowing):
        return None
    try:
        blob = store.open_sync(blob_id)
    except BlobStoreError:
        return None  # loading it says what is wrong
    with contextlib.ExitStack() as closing:
        closing.enter_context(blob)
        if blob.kind != "text":
            return None
        try:
            opened = open_index(store, blob_id, min_bytes=store.index_min_bytes)
        except (BlobStoreError, OSError, IndexUnusable):
            opened = None
        if opened is not None:
            closing.enter_context(opened)
        index = opened if isinstance(opened, TextIndex) else None
        try:
            total, first, last = None, 1, None
            if narrowing:
                total = index.line_count if index is not None else count_lines_in(blob)
                # The lines: steps on a text-less view give core's numbers and errors.
                lines_view = apply_steps(Selector(tuple(narrowing)), LinesView("", 1, total, total))
                assert isinstance(lines_view, LinesView)
                first, last = lines_view.first, lines_view.last
            if index is not None:
                total = index.line_count
                blocks = blob_blocks(blob, start=index.line_start(first))
            else:
                blocks = blob_blocks(blob, first)
            found = grep_search(blocks, grep.compiled, first=first, last=last, page=page)
        except IndexUnusable:
            return None  # a damaged index: the loaded blob gives the same result
    return GrepView(
        found.matches,
        grep.pattern,
        first,
        found.last,
        found.line_count if total is None else total,
        found.complete,
        found.sizes,
        tuple(found.long_lines),
    )


def _json_units(value: Any, selector: Selector) -> list[_Unit]:
    """Indented JSON, grouped by top-level entry so a cut resumes at the next entry."""
    if isinstance(value, list) and value:
        groups = [
            (_indent(dumps_indented(item)), selector.then(Slice(i, None)))
            for i, item in enumerate(value)
        ]
    elif isinstance(value, dict) and value:
        groups = [
            (_indent(f"{dumps_compact(k)}: {dumps_indented(v)}"), selector.then(Key(k)))
            for k, v in value.items()
        ]
    else:
        return [_Unit([dumps_indented(value)], None)]
    opening, closing = ("[", "]") if isinstance(value, list) else ("{", "}")
    units = [_Unit([opening], groups[0][1])]
    for index, (lines, resume) in enumerate(groups):
        if index < len(groups) - 1:
            lines[-1] += ","
        units.append(_Unit(lines, resume))
    units.append(_Unit([closing], None))
    return units


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.split("\n")]


# -- reading through an index ----------------------------------------------------------------
# The same units as above, made only as far as the cap can reach: each is a resume
# selector (known from the index alone) and a loader that reads the unit's content.

Pending = tuple[Resume | None, Callable[[], _Unit]]


def _render_indexed(
    blob_id: BlobId,
    index: TextIndex | JsonIndex,
    selector: Selector | SelectorError,
    policy: Policy,
) -> str:
    limit = policy.inspect_limit
    if isinstance(selector, SelectorError):
        if isinstance(index, TextIndex):
            raise InspectError(explain(selector, Text("")))
        raise InspectError(explain(selector, Structured(stand_in(index, index.root()).value)))
    ref = f"[blob:{blob_id}]"
    if not selector:
        header, pending, more = _indexed_overview(ref, index, policy)
    else:
        state = select(index, selector)
        if isinstance(state, Whole) and state.node.table is None:  # small: read it whole
            state = ValueView(index.value(state.node))
        if isinstance(state, TextLines | Entries | KeyRange | Whole):
            description, pending = _indexed_selected(index, state, selector, limit)
        else:  # read and parsed on the way (e.g. a string reached by key:)
            description, units = _selected(state, selector)
            pending = _loaded(units)
        name = "" if len(selector.steps) == 1 else f"{selector} → "
        header, more = f"{ref} {name}{description}", None
    units, sizes = _enough(pending, limit)
    return _bounded(_cap(header, units, more, limit, sizes), limit)


def _loaded(units: Iterable[_Unit]) -> Iterator[Pending]:
    for unit in units:
        yield unit.resume, lambda unit=unit: unit


def _enough(pending: Iterable[Pending], limit: int) -> tuple[list[_Unit], list[int]]:
    """The units _cap can reach, and their sizes: loaded until their lines alone pass
    *limit*, then the next unit that names a resume selector, as a stand-in without
    content (_cap only reads its selector, for the trailer)."""
    units: list[_Unit] = []
    sizes: list[int] = []
    total = 0
    for resume, load in pending:
        if total > limit and resume is not None:
            units.append(_Unit([], resume))
            sizes.append(0)
            break
        unit = load()
        units.append(unit)
        sizes.append(size := _unit_size(unit))
        total += size
    return units, sizes


def _line_unit(line: IndexedLine, resume: Resume) -> _Unit:
    return _Unit([line.text], resume, size=line.size if line.cut else None)


def _entry_unit(shown: Shown, resume: Resume | None, label: str = "entry") -> _Unit:
    return _Unit([shown.text], resume, label, size=shown.size if shown.cut else None)


def _indexed_overview(
    ref: str, index: TextIndex | JsonIndex, policy: Policy
) -> tuple[str, Iterable[Pending], str | None]:
    """As _overview, reading only the lines, entries or key lines shown."""
    head, limit = policy.inspect_head_lines, policy.inspect_limit
    if isinstance(index, TextIndex):
        total = index.line_count
        header = f"{ref} text | {total} lines | {index.size} bytes"
        shown = min(head, total)
        lines = index.iter_lines(1, shown, max_line_bytes=limit, expected_bytes=limit + 256)
        resume = _resumes(Selector(), lambda n: Lines(n, shown))
        pending = [
            (r, lambda r=r: _line_unit(next(lines), r)) for r in map(resume, range(1, shown + 1))
        ]
        more = None
        if total > shown:
            more = f"{ELLIPSIS} {total - shown} more lines — continue with " + str(
                Lines(shown + 1, min(total, 2 * shown) or None)
            )
        return header, pending, more
    root = index.root()
    table = root.table
    if table is None:
        header = f"{ref} json_{root.kind} | {index.size} bytes"
        value = index.compact(root.start, root.end, limit)
        return header, [(None, lambda: _entry_unit(value, None, "value"))], None
    count = table.count
    if root.kind == "array":
        header = f"{ref} json_array | {count} entries | {index.size} bytes"
        shown = min(head, count)
        spans = list(index.spans(table, 0, shown))

        def schema() -> _Unit:
            if not count:
                return _Unit(["── schema ──", "(empty)"], None)
            first = index.value(Node("", 0, *spans[0]))
            return _Unit(["── schema ──", schema_line(first, 1 << 20)], None)

        pending: list[Pending] = [(None, schema)]
        resume = _resumes(Selector(), lambda i: Slice(i, shown))
        if count:
            head_resume = resume(0)
            pending.append((head_resume, lambda: _Unit(["── head ──"], head_resume)))
        for i, (start, end) in enumerate(spans):
            r = resume(i)
            pending.append(
                (r, lambda r=r, s=start, e=end: _entry_unit(index.compact(s, e, limit), r))
            )
        more = None
        if count > shown:
            more = f"{ELLIPSIS} {count - shown} more entries — continue with " + str(
                Slice(shown, min(count, 2 * shown))
            )
        return header, pending, more
    header = f"{ref} json_object | {count} keys | {index.size} bytes"
    keys = _key_line_units(index, table, 0, count, Selector(), None)
    return header, itertools.chain([(None, lambda: _Unit(["── keys ──"], None))], keys), None


def _key_line_units(
    index: JsonIndex, table: Table, start: int, stop: int, prefix: Selector, end: int | None
) -> Iterator[Pending]:
    """Key lines start..stop-1, each resuming with `keys:` after *prefix*."""
    names = index.key_names(table, start, stop)

    def load(resume: str) -> _Unit:
        name, node = next(names)
        return _Unit([key_line(name, node.shape)], resume, "key line")

    for resume in map(_resumes(prefix, lambda n: Keys(n, end)), range(start, stop)):
        yield resume, lambda resume=resume: load(resume)


def _indexed_selected(
    index: TextIndex | JsonIndex,
    state: TextLines | Entries | KeyRange | Whole,
    selector: Selector,
    limit: int,
) -> tuple[str, Iterable[Pending]]:
    """As _selected, for what the index found: reads only what is shown."""
    steps = selector.steps
    prefix = Selector(steps[:-1])
    last = steps[-1]
    if isinstance(state, TextLines):
        assert isinstance(index, TextIndex) and isinstance(last, Lines)
        lines = index.iter_lines(
            state.first, state.last, max_line_bytes=limit, expected_bytes=limit + 256
        )
        resumes = map(
            _resumes(prefix, lambda n: Lines(n, last.end)), range(state.first, state.last + 1)
        )
        description = f"lines {state.first}-{state.last} of {state.total}"
        return description, (
            (resume, lambda resume=resume: _line_unit(next(lines), resume)) for resume in resumes
        )
    assert isinstance(index, JsonIndex) and state.node.table is not None
    table = state.node.table
    if isinstance(state, KeyRange):
        assert isinstance(last, Keys)
        end = last.end + int(last.inclusive) if last.end is not None else None
        description = f"keys {state.start}..{state.stop} of {state.total} keys"
        return description, _key_line_units(index, table, state.start, state.stop, prefix, end)
    if isinstance(state, Entries):
        assert isinstance(last, Slice)
        end = last.end + int(last.inclusive) if last.end is not None else None
        spans = index.spans(table, state.start, state.stop)

        def entry(resume: str) -> _Unit:
            start, stop = next(spans)
            return _entry_unit(index.compact(start, stop, limit), resume)

        resumes = map(_resumes(prefix, lambda n: Slice(n, end)), range(state.start, state.stop))
        description = f"slice {state.start}..{state.stop} of {state.total} entries"
        return description, ((r, lambda r=r: entry(r)) for r in resumes)
    assert isinstance(last, Key)
    description = f"key {display_key(last.name)}: {state.node.shape}"
    return description, _indexed_json_units(index, state.node, table, selector)


def _indexed_json_units(
    index: JsonIndex, node: Node, table: Table, selector: Selector
) -> Iterator[Pending]:
    """As _json_units, parsing only the entries shown."""
    count = node.count
    if not count:
        empty = _Unit([dumps_indented([] if node.kind == "array" else {})], None)
        yield None, lambda: empty
        return
    opening, closing = ("[", "]") if node.kind == "array" else ("{", "}")
    if node.kind == "array":
        spans = index.spans(table, 0, count)

        def entry(number: int, resume: Selector) -> _Unit:
            start, end = next(spans)
            lines = _indent(dumps_indented(index.value(Node("", 0, start, end))))
            if number < count - 1:
                lines[-1] += ","
            return _Unit(lines, resume)

        first = selector.then(Slice(0, None))
        yield first, lambda: _Unit([opening], first)
        for number in range(count):
            resume = selector.then(Slice(number, None))
            yield resume, lambda n=number, r=resume: entry(n, r)
    else:
        for number, (name, child) in enumerate(index.key_names(table, 0, count)):
            resume = selector.then(Key(name))
            if number == 0:
                yield resume, lambda r=resume: _Unit([opening], r)

            def group(name: str = name, child: Node = child, n: int = number, r=resume) -> _Unit:
                value = dumps_indented(index.value(child))
                lines = _indent(f"{dumps_compact(name)}: {value}")
                if n < count - 1:
                    lines[-1] += ","
                return _Unit(lines, r)

            yield resume, group
    yield None, lambda: _Unit([closing], None)


def _cap(
    header: str, units: list[_Unit], more: str | None, limit: int, sizes: list[int] | None = None
) -> str:
    """Join header and units, stopping at the last whole unit that fits in *limit* bytes
    (*sizes*: the units' sizes, when known already).

    While adding a unit, room is kept for whatever must follow it: the `more` line after
    the last unit, else the trailer that would resume at the next unit.
    """
    if sizes is None:
        sizes = [_unit_size(unit) for unit in units]
    out = [header]
    size = utf8_size(header)
    last = len(units) - 1
    for index, unit in enumerate(units):
        unit_size = sizes[index]
        if index < last:
            reserve = _trailer_size(units[index + 1].resume)
        else:
            reserve = 1 + utf8_size(more) if more else 0
        if size + unit_size + reserve <= limit:
            out += unit.lines
            size += unit_size
            continue
        if index == last and size + unit_size <= limit:
            out += unit.lines  # the whole content fits without the hint line
            return "\n".join(out)
        if len(out) == 1:  # nothing of the body fits whole: show its start
            return "\n".join(out + _cut_unit(unit, units[index + 1 :], limit - size, more))
        if unit.resume is not None:
            out.append(_trailer(unit.resume))
        return "\n".join(out)
    if more:
        out.append(more)
    return "\n".join(out)


def _cut_unit(unit: _Unit, rest: list[_Unit], room: int, more: str | None = None) -> list[str]:
    """The part of a too-big first unit that fits in *room* bytes, and where to go on."""
    if len(unit.lines) > 1:
        resume = unit.resume  # resuming at it drills into the entry, rendered differently
        reserve = _trailer_size(resume)
        shown: list[str] = []
        for line in unit.lines:
            if (needed := 1 + utf8_size(line)) + reserve > room:
                break
            shown.append(line)
            room -= needed
        return shown + ([_trailer(resume)] if resume else [])
    line = unit.lines[0]
    after = next((u.resume for u in rest if u.resume is not None), None)
    tail = [_trailer(after)] if after else [more] if more and not rest else []
    full = utf8_size(line) if unit.size is None else unit.size
    note = f"{ELLIPSIS} this {unit.label} is {full} bytes; only its start is shown"
    room -= 1 + (1 + utf8_size(note)) + sum(1 + utf8_size(t) for t in tail)
    cut = cut_utf8(encode_text(line[: max(room, 0)]), max(room - len(ELLIPSIS.encode()), 0))
    return [decode_text(cut) + ELLIPSIS, note, *tail]


def _bounded(result: str, limit: int) -> str:
    """*result*, or as many of its whole lines as fit with a closing `… truncated` line.

    Only a key, regex or header too long to name within *limit* (or a tiny limit) gets
    here: no trailer that fits can name the selector that reads on.
    """
    if utf8_size(result) <= limit:
        return result
    note = f"{ELLIPSIS} truncated"
    used = utf8_size(note)
    out: list[str] = []
    for line in result.split("\n"):
        needed = utf8_size(line) + 1
        if used + needed > limit:
            if not out:  # the header itself is too long: keep its start
                room = max(limit - used - 1 - len(ELLIPSIS.encode()), 0)
                out.append(decode_text(cut_utf8(encode_text(line[:room]), room)) + ELLIPSIS)
            break
        out.append(line)
        used += needed
    return "\n".join([*out, note])


_TRAILER = f"{ELLIPSIS} truncated — continue with "
_TRAILER_SIZE = utf8_size(_TRAILER)


def _trailer(resume: Resume) -> str:
    return f"{_TRAILER}{resume}"


def _trailer_size(resume: Resume | None) -> int:
    """The bytes the trailer that resumes at *resume* takes, its newline included (0
    without one)."""
    return 1 + _TRAILER_SIZE + utf8_size(str(resume)) if resume else 0


@dataclass(frozen=True, slots=True)
class InspectTool:
    """The built-in `inspect` tool over a blob store (SPEC 2.8).

    It returns its result as Inline, so the result is never promoted; bad ids, missing
    blobs and bad selectors come back as ToolError with the one-line message.
    """

    store: BlobStore
    policy: Policy = DEFAULT_POLICY
    name: str = INSPECT_NAME
    description: str = INSPECT_DESCRIPTION
    parameters: Mapping[str, Any] = field(default_factory=lambda: INSPECT_PARAMETERS)

    async def execute(self, args: dict[str, Any]) -> str:
        try:
            return await inspect_blob_async(
                self.store, args["blob_id"], args.get("selector"), self.policy
            )
        except InspectError as error:
            raise ToolError(str(error)) from None

    async def execute_output(self, args: dict[str, Any]) -> ToolOutput:
        return Inline(await self.execute(args))
