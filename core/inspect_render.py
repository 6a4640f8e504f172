"""What `inspect` shows of a blob: its overview, or the part a selector reaches, read
through the blob's index (core.store.index) so that only what is shown is read; the
headers and the units each kind of part is cut into are in docs/selectors.md.

Every blob is read this way, whatever its size: a big one through the index its store
keeps, a small one through an index built in memory over its bytes
(core.store.index.index_in_memory), so each selector is rendered by one piece of code.
A part without a table of its own (a string reached by `key:`, a value deeper than the
index goes) is read, parsed and rendered from its value (:func:`render_view`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from core.agent.policy import Policy
from core.content import Text, utf8_size
from core.grep import LINE_CAP
from core.grep import Page as GrepPage
from core.inspect_cap import (
    OutputUnit,
    Pending,
    Resume,
    bounded,
    cap,
    enough,
    ready,
    resumes,
    trailer,
)
from core.json_values import display_key, dumps_compact, dumps_indented, shape
from core.selectors import (
    Grep,
    GrepView,
    Key,
    Keys,
    KeysView,
    Lines,
    LinesView,
    Selector,
    Slice,
    ValueView,
    View,
    evaluate,
    key_line,
    mapped_description,
)
from core.store.blob_id import BlobId
from core.store.index import BlobIndex, IndexedLine, JsonIndex, TextIndex
from core.store.index.json_reader import Node, Shown, Table
from core.store.index.selection import Entries, KeyRange, TextLines, Whole, select
from core.summary import ELLIPSIS, schema_line


def render_through_index(
    blob_id: BlobId, index: BlobIndex, selector: Selector, policy: Policy
) -> str:
    """The inspect result for *selector* over the blob that *index* reads. Raises
    SelectorError for a selector that misfits, IndexUnusable when the index turns out not
    to describe the blob, UnicodeDecodeError for a text that is not UTF-8."""
    if not selector:
        header, pending, more = _overview(f"[blob:{blob_id}]", index, policy)
        return _capped(header, pending, more, policy.inspect_limit)
    page = grep_page(blob_id, selector, policy)
    reached = select(index, selector, grep_page=page)
    if isinstance(reached, Whole) and reached.node.table is None:  # small: read it whole
        assert isinstance(index, JsonIndex)
        reached = ValueView(index.value(reached.node))
    if not isinstance(reached, TextLines | Entries | KeyRange | Whole):
        return render_view(blob_id, reached, selector, policy)
    description, pending = _from_index(index, reached, selector, policy.inspect_limit)
    header = f"[blob:{blob_id}] {_named(selector)}{description}"
    return _capped(header, pending, None, policy.inspect_limit)


def render_view(blob_id: BlobId, view: View, selector: Selector, policy: Policy) -> str:
    """The inspect result for a part already read and parsed: a value without a table of
    its own, a string reached by `key:` (and the lines of it), or the matches of a grep."""
    if isinstance(view, ValueView) and view.missing is not None:  # key: over an array
        header = f"[blob:{blob_id}] {selector}: {mapped_description(view)}"
        units = [OutputUnit([dumps_compact(value)], None, "value") for value in view.value]
        return _capped(header, ready(units), None, policy.inspect_limit)
    description, units = _view_units(view, selector)
    header = f"[blob:{blob_id}] {_named(selector)}{description}"
    return _capped(header, ready(units), _grep_more(view, selector), policy.inspect_limit)


def _capped(header: str, pending: Iterable[Pending], more: str | None, limit: int) -> str:
    units, sizes = enough(pending, limit)
    return bounded(cap(header, units, more, limit, sizes), limit)


def _named(selector: Selector) -> str:
    """How a header names a chain of steps (a single step's description names it)."""
    return "" if len(selector.steps) == 1 else f"{selector} → "


# -- the overview ------------------------------------------------------------------------------


def _overview(
    ref: str, index: BlobIndex, policy: Policy
) -> tuple[str, Iterable[Pending], str | None]:
    """The header, the first lines, entries or key lines (only those shown are read), and
    the line that says how many more there are."""
    head, limit = policy.inspect_head_lines, policy.inspect_limit
    if isinstance(index, TextIndex):
        total = index.line_count
        header = f"{ref} text | {total} lines | {index.size} bytes"
        shown = min(head, total)
        lines = index.iter_lines(1, shown, max_line_bytes=limit, expected_bytes=limit + 256)
        resume = resumes(Selector(), lambda n: Lines(n, shown))
        pending: list[Pending] = [
            (r, functools.partial(_next_line, lines, r)) for r in map(resume, range(1, shown + 1))
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
        return header, [(None, functools.partial(_shown_unit, value, None, "value"))], None
    if root.kind == "array":
        return _array_overview(ref, index, table, policy)
    header = f"{ref} json_object | {table.count} keys | {index.size} bytes"
    keys = _key_line_units(index, table, 0, table.count, Selector(), None)
    heading = (None, functools.partial(OutputUnit, ["── keys ──"], None))
    return header, itertools.chain([heading], keys), None


def _array_overview(
    ref: str, index: JsonIndex, table: Table, policy: Policy
) -> tuple[str, Iterable[Pending], str | None]:
    """An array's schema (its first entry's) and first entries."""
    count = table.count
    header = f"{ref} json_array | {count} entries | {index.size} bytes"
    shown = min(policy.inspect_head_lines, count)
    spans = list(index.spans(table, 0, shown))

    def schema() -> OutputUnit:
        if not count:
            return OutputUnit(["── schema ──", "(empty)"], None)
        first = index.value(Node("", 0, *spans[0]))
        lines = ["── schema ──", schema_line(first, 1 << 20)]
        if isinstance(first, dict) and first:  # an array of objects: one key of each
            lines.append(f"({Key(next(iter(first)))} gives that key of every entry)")
        return OutputUnit(lines, None)

    pending: list[Pending] = [(None, schema)]
    resume = resumes(Selector(), lambda i: Slice(i, shown))
    if count:
        head_resume = resume(0)
        pending.append((head_resume, functools.partial(OutputUnit, ["── head ──"], head_resume)))
    limit = policy.inspect_limit
    for i, (start, end) in enumerate(spans):
        r = resume(i)
        pending.append((r, functools.partial(_entry_unit, index, start, end, limit, r)))
    more = None
    if count > shown:
        more = f"{ELLIPSIS} {count - shown} more entries — continue with " + str(
            Slice(shown, min(count, 2 * shown))
        )
    return header, pending, more


# -- a part found through the index ------------------------------------------------------------
# Each unit is a resume selector (known from the index alone) and a loader that reads the
# unit's content, so only the units the cap can reach are read.


def _next_line(lines: Iterator[IndexedLine], resume: Resume) -> OutputUnit:
    line = next(lines)
    return OutputUnit([line.text], resume, size=line.size if line.cut else None)


def _shown_unit(shown: Shown, resume: Resume | None, label: str = "entry") -> OutputUnit:
    return OutputUnit([shown.text], resume, label, size=shown.size if shown.cut else None)


def _entry_unit(index: JsonIndex, start: int, end: int, limit: int, resume: Resume) -> OutputUnit:
    return _shown_unit(index.compact(start, end, limit), resume)


def _from_index(
    index: BlobIndex,
    state: TextLines | Entries | KeyRange | Whole,
    selector: Selector,
    limit: int,
) -> tuple[str, Iterable[Pending]]:
    """The description and units of a range of lines, entries or key lines, or of a value
    with a table (shown indented, an entry or key at a time)."""
    steps = selector.steps
    prefix = Selector(steps[:-1])
    last = steps[-1]
    if isinstance(state, TextLines):
        assert isinstance(index, TextIndex) and isinstance(last, Lines)
        lines = index.iter_lines(
            state.first, state.last, max_line_bytes=limit, expected_bytes=limit + 256
        )
        line_resumes = map(
            resumes(prefix, lambda n: Lines(n, last.end)), range(state.first, state.last + 1)
        )
        description = f"lines {state.first}-{state.last} of {state.total}"
        return description, ((r, functools.partial(_next_line, lines, r)) for r in line_resumes)
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

        def entry(resume: Resume) -> OutputUnit:
            start, stop = next(spans)
            return _entry_unit(index, start, stop, limit, resume)

        entry_resumes = map(
            resumes(prefix, lambda n: Slice(n, end)), range(state.start, state.stop)
        )
        description = f"slice {state.start}..{state.stop} of {state.total} entries"
        return description, ((r, functools.partial(entry, r)) for r in entry_resumes)
    assert isinstance(last, Key)
    description = f"key {display_key(last.name)}: {state.node.shape}"
    return description, _indexed_json_units(index, state.node, table, selector)


def _key_line_units(
    index: JsonIndex, table: Table, start: int, stop: int, prefix: Selector, end: int | None
) -> Iterator[Pending]:
    """Key lines start..stop-1, each resuming with `keys:` after *prefix*."""
    names = index.key_names(table, start, stop)

    def load(resume: Resume) -> OutputUnit:
        name, node = next(names)
        return OutputUnit([key_line(name, node.shape)], resume, "key line")

    for resume in map(resumes(prefix, lambda n: Keys(n, end)), range(start, stop)):
        yield resume, functools.partial(load, resume)


def _indexed_json_units(
    index: JsonIndex, node: Node, table: Table, selector: Selector
) -> Iterator[Pending]:
    """As _json_units, parsing only the entries shown."""
    count = node.count
    if not count:
        empty = dumps_indented([] if node.kind == "array" else {})
        yield None, functools.partial(OutputUnit, [empty], None)
        return
    opening, closing = ("[", "]") if node.kind == "array" else ("{", "}")
    if node.kind == "array":
        spans = index.spans(table, 0, count)

        def entry(number: int, resume: Selector) -> OutputUnit:
            start, end = next(spans)
            lines = _indent(dumps_indented(index.value(Node("", 0, start, end))))
            if number < count - 1:
                lines[-1] += ","
            return OutputUnit(lines, resume)

        first = selector.then(Slice(0, None))
        yield first, functools.partial(OutputUnit, [opening], first)
        for number in range(count):
            resume = selector.then(Slice(number, None))
            yield resume, functools.partial(entry, number, resume)
    else:

        def group(name: str, child: Node, number: int, resume: Selector) -> OutputUnit:
            value = dumps_indented(index.value(child))
            lines = _indent(f"{dumps_compact(name)}: {value}")
            if number < count - 1:
                lines[-1] += ","
            return OutputUnit(lines, resume)

        for number, (name, child) in enumerate(index.key_names(table, 0, count)):
            resume = selector.then(Key(name))
            if number == 0:
                yield resume, functools.partial(OutputUnit, [opening], resume)
            yield resume, functools.partial(group, name, child, number, resume)
    yield None, functools.partial(OutputUnit, [closing], None)


# -- a part read and parsed --------------------------------------------------------------------


def _view_units(view: View, selector: Selector) -> tuple[str, list[OutputUnit]]:
    """The description and units of a part read whole: lines of a string, matches, key
    lines, entries, or a value."""
    steps = selector.steps
    prefix = Selector(steps[:-1])
    last = steps[-1]
    if isinstance(view, LinesView):
        assert isinstance(last, Lines)
        description = f"lines {view.first}-{view.last} of {view.total}"
        resume = resumes(prefix, lambda n: Lines(n, last.end))
        return description, [OutputUnit([line], resume(n)) for n, line in view.numbered()]
    if isinstance(view, GrepView):
        return grep_description(view), _grep_units(view, selector)
    if isinstance(view, KeysView):
        assert isinstance(last, Keys)
        description = f"keys {view.start}..{view.start + len(view.keys)} of {view.total} keys"
        end = last.end + int(last.inclusive) if last.end is not None else None
        resume = resumes(prefix, lambda n: Keys(n, end))
        return description, [
            OutputUnit([line], resume(view.start + i), "key line")
            for i, line in enumerate(view.lines())
        ]
    if isinstance(last, Slice):
        start = view.start or 0
        stop = start + len(view.value)
        description = f"slice {start}..{stop} of {view.total} entries"
        end = last.end + int(last.inclusive) if last.end is not None else None
        resume = resumes(prefix, lambda n: Slice(n, end))
        return description, [
            OutputUnit([dumps_compact(item)], resume(start + i), "entry")
            for i, item in enumerate(view.value)
        ]
    assert isinstance(last, Key)
    value = view.value
    description = f"key {display_key(last.name)}: {shape(value)}"
    if isinstance(value, str):
        lines_view = evaluate(Selector((Lines(1, None),)), Text(value)) if value else None
        units = []
        if isinstance(lines_view, LinesView):
            resume = resumes(selector, lambda n: Lines(n, None))
            units = [OutputUnit([line], resume(n)) for n, line in lines_view.numbered()]
        return description, units
    return description, _json_units(value, selector)


def _json_units(value: Any, selector: Selector) -> list[OutputUnit]:
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
        return [OutputUnit([dumps_indented(value)], None)]
    opening, closing = ("[", "]") if isinstance(value, list) else ("{", "}")
    units = [OutputUnit([opening], groups[0][1])]
    for number, (lines, resume) in enumerate(groups):
        if number < len(groups) - 1:
            lines[-1] += ","
        units.append(OutputUnit(lines, resume))
    units.append(OutputUnit([closing], None))
    return units


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.split("\n")]


# -- grep: one page of matches -----------------------------------------------------------------
# A grep step stops once its matches fill what the cap leaves after the header and the
# trailer (core.grep.Page), so every match it found is shown, the header counts exactly
# those, and the trailer goes on after the last line searched: `lines:<B+1>- | grep:...`.

_WIDEST_NUMBER = 10**20  # wider than any line number: room kept for the header and trailer


def grep_page(blob_id: BlobId, selector: Selector, policy: Policy) -> GrepPage:
    """The page a grep step may fill: the cap less the widest header and trailer."""
    limit = policy.inspect_limit
    if not selector or not isinstance(selector.steps[-1], Grep):
        return GrepPage(max_bytes=limit, line_bytes=limit)
    narrowed, end, grep = _grep_parts(selector)
    widest = GrepView([], grep.pattern, 1, 1, None)
    header = f"[blob:{blob_id}] {_named(selector)}{grep_description(widest, widest=True)}"
    room = limit - utf8_size(header) - 1
    room -= utf8_size(trailer(narrowed.then(Lines(_WIDEST_NUMBER, end), grep)))
    return GrepPage(max_bytes=max(room, 0), line_bytes=limit)


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


def grep_description(view: GrepView, *, widest: bool = False) -> str:
    """`grep <pattern>: <n> matches in lines <A>-<B> of <N>` (N is `?` when nothing counted
    the text's lines), then a note when lines longer than LINE_CAP were searched in part."""
    if view.total == 0 and not widest:
        return f"grep {view.pattern}: 0 matches in an empty text"
    numbers: list[int | str] = [
        len(view.matches),
        view.first,
        view.last,
        "?" if view.total is None else view.total,
    ]
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


def _grep_units(view: GrepView, selector: Selector) -> list[OutputUnit]:
    narrowed, end, grep = _grep_parts(selector)
    units = []
    for number, line in view.matches:
        shown = f"{number}: {line}"
        size = view.sizes.get(number)
        units.append(
            OutputUnit(
                [shown],
                narrowed.then(Lines(number, end), grep),
                "match",
                size=None if size is None else len(f"{number}: ") + size,
            )
        )
    return units


def _grep_more(view: View, selector: Selector) -> str | None:
    """The trailer after a page of matches that ended before the lines searched did."""
    if not isinstance(view, GrepView) or view.complete:
        return None
    narrowed, end, grep = _grep_parts(selector)
    return trailer(narrowed.then(Lines(view.last + 1, end), grep))
