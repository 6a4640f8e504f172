"""The built-in `inspect` tool: what the model reads of a stored blob (SPEC 2.8).

The result starts with a header line `[blob:<id>] ...`, then the selected content, and
never exceeds ``policy.inspect_limit`` bytes: it stops at the last whole line that fits
and ends with `… truncated — continue with <selector>`, naming the exact next selector.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.blob_errors import BlobStoreError
from core.blob_id import BlobId, parse_blob_id
from core.blob_store import TEXT_SUFFIX, BlobStore, FsBlobStore
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
from core.json_values import (
    display_key,
    dumps_compact,
    dumps_for_storage,
    dumps_indented,
    json_type,
    shape,
)
from core.line_index import LineIndex
from core.policy import DEFAULT_POLICY, Policy
from core.selectors import (
    GrepView,
    Key,
    Keys,
    KeysView,
    Lines,
    LinesView,
    Selector,
    SelectorError,
    Slice,
    ValueView,
    evaluate,
    explain,
    parse_selector,
    past_the_end,
)
from core.summary import ELLIPSIS, key_lines, schema_line
from core.tools import ToolError

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
- grep:regex   the lines of a text that match a Python regex, as <line number>: <line>
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
    if isinstance(store, FsBlobStore) and isinstance(parsed, Selector):
        args = (store, parsed_id, parsed, policy)
        if (result := await asyncio.to_thread(_lines_from_file, *args)) is not None:
            return result
    try:
        content = await store.load(parsed_id)
    except BlobStoreError as error:
        raise InspectError(str(parsed if isinstance(parsed, SelectorError) else error)) from None
    return _render_or_raise(parsed_id, content, parsed, policy)


def inspect_blob(
    store: FsBlobStore, blob_id: str, selector: str | None = None, policy: Policy = DEFAULT_POLICY
) -> str:
    """:func:`inspect_blob_async` for synchronous callers (the CLI, the web site)."""
    parsed_id, parsed = _parse(blob_id, selector)
    if isinstance(parsed, Selector) and (
        result := _lines_from_file(store, parsed_id, parsed, policy)
    ):
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


def _lines_from_file(
    store: FsBlobStore, blob_id: BlobId, selector: Selector, policy: Policy
) -> str | None:
    """`lines:A-B` of a text blob, read through a line index instead of loading the blob:
    one pass to count lines, then only the lines shown are read and decoded. The result is
    the same as :func:`render_inspect` gives; None when the selector or blob is another kind.
    """
    if len(selector.steps) != 1 or not isinstance(step := selector.steps[0], Lines):
        return None
    try:
        path = store.path_of(blob_id)
        if path.suffix != TEXT_SUFFIX:
            return None
        index = LineIndex.build(path)
        total = index.line_count
        if step.start > total:
            raise InspectError(str(past_the_end(step, total)))
        last = total if step.end is None else min(step.end, total)
        # Every shown line takes at least one byte, so no more than the limit can be shown.
        stop = min(last, step.start + policy.inspect_limit)
        lines = index.read_lines(path, step.start, stop, max_line_bytes=policy.inspect_limit)
    except BlobStoreError as error:
        raise InspectError(str(error)) from None
    except UnicodeDecodeError:
        raise InspectError(f"blob {blob_id} is not UTF-8 text") from None
    except OSError as error:
        raise InspectError(f"cannot read blob {blob_id}: {error.strerror}") from None
    header = f"[blob:{blob_id}] lines {step.start}-{last} of {total}"
    units = [
        _Unit([line.text], Selector((Lines(line.number, step.end),)), size=line.size)
        for line in lines
    ]
    return _bounded(_cap(header, units, None, policy.inspect_limit), policy.inspect_limit)


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


@dataclass(frozen=True, slots=True)
class _Unit:
    """A run of output lines that is kept or dropped whole, and the selector that resumes
    the output at it. A single-line unit that alone exceeds the limit is cut."""

    lines: list[str]
    resume: Selector | None
    label: str = "line"  # how the note on a cut line names it
    size: int | None = None  # a one-line unit's full size when `lines` holds only its start


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
        view = evaluate(selector, content)
        description, units = _selected(view, selector)
        name = "" if len(selector.steps) == 1 else f"{selector} → "
        header, more = f"{ref} {name}{description}", None
    return _bounded(_cap(header, units, more, policy.inspect_limit), policy.inspect_limit)


def _overview(ref: str, content: Content, policy: Policy) -> tuple[str, list[_Unit], str | None]:
    head = policy.inspect_head_lines
    if isinstance(content, Text):
        text = content.text
        view = evaluate(None, content)
        assert isinstance(view, LinesView)
        header = f"{ref} text | {view.total} lines | {utf8_size(text)} bytes"
        shown = min(head, view.total)
        units = [_Unit([line], Selector((Lines(n, shown),))) for n, line in view.numbered(1, shown)]
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
            units.append(_Unit(["── head ──"], Selector((Slice(0, shown),))))
            units += [
                _Unit([dumps_compact(item)], Selector((Slice(i, shown),)), "entry")
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
        units += [
            _Unit([line], Selector((Keys(i, None),)), "key line")
            for i, line in enumerate(key_lines(value))
        ]
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
        return description, [
            _Unit([line], prefix.then(Lines(n, last.end))) for n, line in view.numbered()
        ]
    if isinstance(view, GrepView):
        # Resume after a match by narrowing the lines the regex runs over.
        narrowed = prefix
        end = view.last if view.last < view.total else None
        if narrowed.steps and isinstance(narrowed.steps[-1], Lines):
            end = narrowed.steps[-1].end
            narrowed = Selector(narrowed.steps[:-1])
        description = (
            f"grep {last.pattern}: {len(view.matches)} of {view.last - view.first + 1} lines match"
        )
        return description, [
            _Unit([f"{n}: {line}"], narrowed.then(Lines(n, end), last)) for n, line in view.matches
        ]
    if isinstance(view, KeysView):
        assert isinstance(last, Keys)
        description = f"keys {view.start}..{view.start + len(view.keys)} of {view.total} keys"
        end = last.end + int(last.inclusive) if last.end is not None else None
        return description, [
            _Unit([line], prefix.then(Keys(view.start + i, end)), "key line")
            for i, line in enumerate(view.lines())
        ]
    assert isinstance(view, ValueView)
    if isinstance(last, Slice):
        start = view.start or 0
        stop = start + len(view.value)
        description = f"slice {start}..{stop} of {view.total} entries"
        end = last.end + int(last.inclusive) if last.end is not None else None
        return description, [
            _Unit([dumps_compact(item)], prefix.then(Slice(start + i, end)), "entry")
            for i, item in enumerate(view.value)
        ]
    assert isinstance(last, Key)
    value = view.value
    description = f"key {display_key(last.name)}: {shape(value)}"
    if isinstance(value, str):
        lines_view = evaluate(Selector((Lines(1, None),)), Text(value)) if value else None
        units = []
        if isinstance(lines_view, LinesView):
            units = [
                _Unit([line], selector.then(Lines(n, None))) for n, line in lines_view.numbered()
            ]
        return description, units
    return description, _json_units(value, selector)


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


def _cap(header: str, units: list[_Unit], more: str | None, limit: int) -> str:
    """Join header and units, stopping at the last whole unit that fits in *limit* bytes.

    While adding a unit, room is kept for whatever must follow it: the `more` line after
    the last unit, else the trailer that would resume at the next unit.
    """
    out = [header]
    size = utf8_size(header)
    for index, unit in enumerate(units):
        unit_size = sum(1 + utf8_size(line) for line in unit.lines)
        if unit.size is not None:
            unit_size = 1 + unit.size
        if index + 1 < len(units):
            resume = units[index + 1].resume
            reserve = 1 + utf8_size(_trailer(resume)) if resume else 0
        else:
            reserve = 1 + utf8_size(more) if more else 0
        if size + unit_size + reserve <= limit:
            out += unit.lines
            size += unit_size
            continue
        if index + 1 == len(units) and size + unit_size <= limit:
            out += unit.lines  # the whole content fits without the hint line
            return "\n".join(out)
        if len(out) == 1:  # nothing of the body fits whole: show its start
            return "\n".join(out + _cut_unit(unit, units[index + 1 :], limit - size))
        if unit.resume is not None:
            out.append(_trailer(unit.resume))
        return "\n".join(out)
    if more:
        out.append(more)
    return "\n".join(out)


def _cut_unit(unit: _Unit, rest: list[_Unit], room: int) -> list[str]:
    """The part of a too-big first unit that fits in *room* bytes, and where to go on."""
    if len(unit.lines) > 1:
        resume = unit.resume  # resuming at it drills into the entry, rendered differently
        reserve = 1 + utf8_size(_trailer(resume)) if resume else 0
        shown: list[str] = []
        for line in unit.lines:
            if (needed := 1 + utf8_size(line)) + reserve > room:
                break
            shown.append(line)
            room -= needed
        return shown + ([_trailer(resume)] if resume else [])
    line = unit.lines[0]
    after = next((u.resume for u in rest if u.resume is not None), None)
    tail = [_trailer(after)] if after else []
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


def _trailer(selector: Selector) -> str:
    return f"{ELLIPSIS} truncated — continue with {selector}"


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
