"""Selectors: the one parser and evaluator behind `inspect`, the CLI and the web viewer.

    selector := step ( "|" step )*        whitespace around "|" is ignored
    step     := lines:A-B | lines:A | lines:A- | slice:<Rust range> | key:<name>
              | keys:<Rust range> | grep:<regex>

Line numbers (`lines:`, `grep:`) always count in the text they were reached from (the blob,
or a string value), so `lines:` after `lines:` narrows the range and `grep:` after
`lines:` reports the text's own line numbers. Likewise `slice:` after `slice:` narrows, and
`keys:` (an object's key lines, paged as `slice:` pages an array) after `keys:`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.content import Content, Structured, Text
from core.grep import Page, Pattern, PatternError, compile_pattern, search, text_blocks
from core.json_values import display_key, json_type, shape
from core.lines import count_lines, line_slice, line_start, split_lines

STEP_NAMES = ("lines", "slice", "key", "keys", "grep")
FORMS = "lines:A-B, slice:A..B, key:name, keys:A..B or grep:regex"
# A grep step stops once its matches fill this page (the inspect cap) unless its caller
# asks for another: it goes on from where it stopped with `lines:N- | grep:...`.
DEFAULT_GREP_PAGE = Page(max_bytes=8000)


# Lone surrogates: code points a Python str may hold (JSON's "\ud800", an undecodable byte
# in a command-line argument) but UTF-8 cannot encode, so no page or database can show one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """*text* with each lone surrogate written as its escape (`\\ud800`); inside a JSON
    string that escape means the same code point, so a quoted name stays valid JSON."""
    if not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class SelectorError(ValueError):
    """A selector is malformed or does not fit the blob; the message is one line.

    The message never holds a lone surrogate (they are shown escaped), so every caller
    can print it, send it as UTF-8 or put it in a page.
    """

    def __init__(self, message: str) -> None:
        super().__init__(escape_surrogates(message))


# -- the parsed form ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lines:
    start: int
    end: int | None  # inclusive; None means "to the last line"
    single: bool = False  # written as lines:A

    def __str__(self) -> str:
        if self.single:
            return f"lines:{self.start}"
        return f"lines:{self.start}-{'' if self.end is None else self.end}"


@dataclass(frozen=True, slots=True)
class _Range:
    """`<name>:A..B` and `<name>:A..=B`: a range of entries, 0-based and clamped."""

    start: int | None
    end: int | None  # exclusive unless inclusive; None means open
    inclusive: bool = False

    name: ClassVar[str]

    def __str__(self) -> str:
        start = "" if self.start is None else self.start
        end = "" if self.end is None else self.end
        return f"{self.name}:{start}..{'=' if self.inclusive else ''}{end}"

    def bounds(self, size: int) -> tuple[int, int]:
        """Half-open [start, stop) clamped to *size* entries."""
        first = 0 if self.start is None else self.start
        stop = size if self.end is None else self.end + int(self.inclusive)
        return min(first, size), min(stop, size)


@dataclass(frozen=True, slots=True)
class Slice(_Range):
    """`slice:A..B`: the entries A..B of an array."""

    name: ClassVar[str] = "slice"


@dataclass(frozen=True, slots=True)
class Keys(_Range):
    """`keys:A..B`: the key lines A..B of an object."""

    name: ClassVar[str] = "keys"


@dataclass(frozen=True, slots=True)
class Key:
    name: str

    def __str__(self) -> str:
        return f"key:{_quote_if_needed(self.name)}"


@dataclass(frozen=True, slots=True)
class Grep:
    pattern: str
    compiled: Pattern = field(compare=False)  # RE2, compiled from pattern (core.grep)

    def __str__(self) -> str:
        return f"grep:{_quote_if_needed(self.pattern)}"


Step = Lines | Slice | Key | Keys | Grep


@dataclass(frozen=True, slots=True)
class Selector:
    steps: tuple[Step, ...] = ()

    def __str__(self) -> str:
        return " | ".join(str(step) for step in self.steps)

    def __bool__(self) -> bool:
        return bool(self.steps)

    def then(self, *steps: Step) -> Selector:
        return Selector(self.steps + steps)


def _quote_if_needed(name: str) -> str:
    if not name or name != name.strip() or "|" in name or name.startswith('"'):
        return _quoted(name)
    if any(ch < " " for ch in name) or _SURROGATE.search(name):
        return _quoted(name)
    return name


def _quoted(name: str) -> str:
    # json.dumps keeps a lone surrogate as it is; its escape keeps the canonical form
    # encodable (a share link stores it) and parses back to the same name.
    return escape_surrogates(json.dumps(name, ensure_ascii=False))


# -- parsing --------------------------------------------------------------------------------

_STEP_START = re.compile(r"\s*([A-Za-z_]+)\s*:")
_NEXT_STEP = re.compile(r"\|\s*(?:lines|slice|keys|key|grep)\s*:", re.IGNORECASE)
# [0-9], not \d: \d also matches other scripts' digits.
_LINES = re.compile(r"([0-9]+)(?:\s*(-)\s*([0-9]*))?")
_SLICE = re.compile(r"([0-9]*)\s*\.\.(=?)\s*([0-9]*)")
_HUGE = 10**100  # past the end of anything; stands in for numbers too long for int()
_JSON = json.JSONDecoder()


def parse_selector(text: str | None) -> Selector:
    """Parse *text*; None or blank is the empty selector. Raises SelectorError."""
    if text is not None and not isinstance(text, str):
        raise SelectorError(f"a selector must be a string, got {type(text).__name__}")
    if text is None or not text.strip():
        return Selector()
    if surrogate := _SURROGATE.search(text):
        # Not text at all: no page, database or UTF-8 stream could carry it. A name that
        # really holds one is written with JSON's escape, which is plain text.
        shown = escape_surrogates(surrogate.group())
        raise SelectorError(
            f"the selector holds a lone surrogate ({shown} at column {surrogate.start() + 1}),"
            f' which is not text; to name one, quote it as JSON: key:"{shown}"'
        )
    steps: list[Step] = []
    position = 0
    while True:
        match = _STEP_START.match(text, position)
        if not match:
            rest = text[position:].strip()
            if not rest:
                raise SelectorError(f"the selector ends with '|'; expected {FORMS} after it")
            hint = ' (quote a key or regex that contains "|" as JSON: key:"a|b")' if steps else ""
            raise SelectorError(f"expected {FORMS}; got {_shown(rest)}{hint}")
        name = match.group(1).lower()
        if name not in STEP_NAMES:
            raise SelectorError(f"unknown selector {name + ':'!r}; expected {FORMS}")
        position = match.end()
        argument, position = _argument(text, position, name)
        steps.append(_parsed_step(name, argument))
        if position >= len(text):
            return Selector(tuple(steps))
        position += 1  # past the "|"


def _argument(text: str, position: int, name: str) -> tuple[str | _Quoted, int]:
    """The step's argument and the position of the "|" after it (or the end)."""
    start = position
    while start < len(text) and text[start].isspace():
        start += 1
    if name in ("key", "grep") and text.startswith('"', start):
        try:
            value, end = _JSON.raw_decode(text, start)
        except json.JSONDecodeError as error:
            raise SelectorError(
                f"{name}: bad quoted string ({error.msg} column {error.pos + 1}); "
                f'expected a JSON string like {name}:"a|b"'
            ) from None
        rest = text[end:]
        stripped = rest.lstrip()
        if stripped and not stripped.startswith("|"):
            raise SelectorError(f"{name}: expected '|' or the end after the quoted string")
        return _Quoted(value), end + (len(rest) - len(stripped))
    if name == "grep":
        # A regex may use "|" itself; only a "|" that starts another step ends it.
        match = _NEXT_STEP.search(text, start)
        end = match.start() if match else len(text)
    else:
        end = text.find("|", start)
        end = len(text) if end < 0 else end
    return text[start:end].strip(), end


@dataclass(frozen=True, slots=True)
class _Quoted:
    value: object


def _parsed_step(name: str, argument: str | _Quoted) -> Step:
    if name == "lines":
        return _lines_step(argument)
    if name == "slice":
        return _slice_step(argument)
    if name == "keys":
        return _keys_step(argument)
    quoted = isinstance(argument, _Quoted)
    if isinstance(argument, _Quoted):
        if not isinstance(argument.value, str):
            raise SelectorError(f"{name}: the quoted value must be a JSON string")
        argument = argument.value
    if name == "key":
        if not argument and not quoted:  # key:"" names the empty key
            raise SelectorError('key: expects a key name, e.g. key:results (or key:"" for "")')
        return Key(argument)
    if not argument:
        raise SelectorError("grep: expects a regex, e.g. grep:error|warning")
    try:
        # RE2 syntax (docs/selectors.md): linear time, so no pattern can hang a caller.
        return Grep(argument, compile_pattern(argument))
    except PatternError as error:
        raise SelectorError(f"grep: invalid regex {_shown(argument)}: {error}") from None


def _lines_step(argument: str | _Quoted) -> Lines:
    expected = "lines: expects A-B, A or A- with line numbers from 1 (e.g. lines:20-50)"
    match = _LINES.fullmatch(argument) if isinstance(argument, str) else None
    if not match:
        raise SelectorError(f"{expected}; got {_shown(str(argument))}")
    start = _number(match.group(1))
    end = _number(match.group(3)) if match.group(3) else None
    if start < 1:
        raise SelectorError("lines: line numbers start at 1")
    if end is not None and end < start:
        raise SelectorError(f"lines:{start}-{end}: the end is before the start")
    single = match.group(2) is None
    return Lines(start, start if single else end, single=single)


def _slice_step(argument: str | _Quoted) -> Slice:
    return Slice(*_range("slice", "entry", argument))


def _keys_step(argument: str | _Quoted) -> Keys:
    return Keys(*_range("keys", "key", argument))


def _range(name: str, noun: str, argument: str | _Quoted) -> tuple[int | None, int | None, bool]:
    """(start, end, inclusive) of a Rust range written after `slice:` or `keys:`."""
    expected = f"{name}: expects a range of {noun} indexes from 0: A..B, A.., ..B, A..=B or .."
    match = _SLICE.fullmatch(argument) if isinstance(argument, str) else None
    if not match:
        raise SelectorError(f"{expected} (e.g. {name}:0..10); got {_shown(str(argument))}")
    start = _number(match.group(1)) if match.group(1) else None
    inclusive = bool(match.group(2))
    end = _number(match.group(3)) if match.group(3) else None
    if inclusive and end is None:
        raise SelectorError(f"{name}: ..= needs an end, e.g. {name}:0..=9")
    if start is not None and end is not None and start > (end + 1 if inclusive else end):
        raise SelectorError(f"{name}:{argument}: the start is after the end")
    return start, end, inclusive


def _number(digits: str) -> int:
    # int() refuses more than 4300 digits; a number that long is past every end anyway.
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 100 else _HUGE


def _shown(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:57] + "...")


# -- evaluation -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinesView:
    """Lines *first*..*last* (1-based, inclusive) of *text*, which has *total* lines."""

    text: str
    first: int
    last: int
    total: int

    def lines(self, start: int | None = None, end: int | None = None) -> list[str]:
        """The lines in view, or those of them numbered *start*..*end*."""
        start = self.first if start is None else max(start, self.first)
        end = self.last if end is None else min(end, self.last)
        if start == 1 and end >= self.total:
            return split_lines(self.text)
        return line_slice(self.text, start, end)

    def numbered(
        self, start: int | None = None, end: int | None = None
    ) -> Iterator[tuple[int, str]]:
        first = self.first if start is None else max(start, self.first)
        return enumerate(self.lines(start, end), start=first)


@dataclass(frozen=True, slots=True)
class ValueView:
    """A JSON value. For a slice, *value* is the selected entries, *start* the index of the
    first of them and *total* the length of the array they come from. For `key:` over an
    array (*missing* not None), *value* is each entry's value of that key, `null` for the
    *missing* entries that are not objects or lack it."""

    value: Any
    start: int | None = None
    total: int | None = None
    missing: int | None = None


@dataclass(frozen=True, slots=True)
class GrepView:
    """Lines of a text that match *pattern*, as (line number, line), found in lines
    *first*..*last*, every one of which was searched.

    A search stops once its matches fill a page (core.grep.Page): then *complete* is False
    and the next page starts at line last + 1. *total* is the text's line count, None when
    nothing counted it (the search stopped early in a blob's file that has no index). A
    matching line longer than the page's line size is held cut; *sizes* has its whole size.
    *long_lines* are lines longer than core.grep.LINE_CAP, matched on their first part only.
    """

    matches: list[tuple[int, str]]
    pattern: str
    first: int
    last: int
    total: int | None
    complete: bool = True
    sizes: dict[int, int] = field(default_factory=dict)
    long_lines: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class KeysView:
    """Key lines of an object that has *total* keys: the keys numbered *start*.. in
    document order, each with the shape of its value."""

    keys: list[tuple[str, str]]  # (name, shape)
    start: int
    total: int

    def lines(self) -> list[str]:
        """The key lines as the object overview shows them: `name: shape`."""
        return [key_line(name, value_shape) for name, value_shape in self.keys]


def key_line(name: str, value_shape: str) -> str:
    """One key line: the key as shown on one line, and the shape of its value."""
    if name.isascii() and name.isprintable() and name and name == name.strip():
        return f"{name}: {value_shape}"  # as display_key shows it, found quicker
    return f"{display_key(name)}: {value_shape}"


View = LinesView | ValueView | GrepView | KeysView


def content_view(content: Content) -> View:
    """The view of a whole blob: all of its lines, or its whole value."""
    if isinstance(content, Text):
        total = count_lines(content.text)
        return LinesView(content.text, 1, total, total)
    if isinstance(content, Structured):
        return ValueView(content.value)
    raise TypeError(f"content must be Text or Structured, got {type(content).__name__}")


def kind_of(view: View) -> str:
    if isinstance(view, LinesView):
        return "text"
    if isinstance(view, GrepView):
        return "grep result"
    if isinstance(view, KeysView):
        return "key lines"
    if isinstance(view.value, list) and (view.start is not None or view.missing is not None):
        return "json_array"
    return f"json_{json_type(view.value)}"


def suggestion(view: View) -> str:
    """Which selectors fit *view*, as advice for an error message."""
    if isinstance(view, LinesView) or (isinstance(view, ValueView) and isinstance(view.value, str)):
        return "try lines:1-40 or grep:<regex>"
    if isinstance(view, GrepView):
        return "grep: must be the last step"
    if isinstance(view, KeysView):
        return "only keys: may follow keys:"
    if isinstance(view.value, list):
        first = view.value[0] if view.value else None
        if isinstance(first, dict) and first:
            return f"try slice:0..10, or {Key(next(iter(first)))} for that key of every entry"
        return "try slice:0..10"
    if isinstance(view.value, dict):
        if not view.value:
            return "it has no keys"
        return f"try {Key(next(iter(view.value)))}"
    return "it has no parts to select; inspect it without a selector"


def explain(error: SelectorError, content: Content) -> str:
    """A parse error's message, followed by the kind of *content* and what fits it."""
    view = content_view(content)
    return f"{error} (this blob is {kind_of(view)} — {suggestion(view)})"


def evaluate(
    selector: Selector | str | None, content: Content, *, grep_page: Page = DEFAULT_GREP_PAGE
) -> View:
    """Apply every step of *selector* to *content*; raises SelectorError. A `grep:` step
    stops once its matches fill *grep_page*."""
    if not isinstance(selector, Selector):
        selector = parse_selector(selector)
    return apply_steps(selector, content_view(content), grep_page=grep_page)


def apply_steps(selector: Selector, view: View, *, grep_page: Page = DEFAULT_GREP_PAGE) -> View:
    """Apply every step of *selector* to *view*, naming in errors what each step reached."""
    for index, step in enumerate(selector.steps):
        reached = "this blob" if index == 0 else str(Selector(selector.steps[:index]))
        view = apply_step(step, view, reached=reached, grep_page=grep_page)
    return view


def apply_step(
    step: Step, view: View, *, reached: str = "this blob", grep_page: Page = DEFAULT_GREP_PAGE
) -> View:
    if isinstance(step, Lines | Grep):
        text_view = _as_text(view)
        if text_view is None:
            raise _misapplied(step, "text", view, reached)
        if isinstance(step, Lines):
            return _lines(step, text_view)
        return _grep(step, text_view, grep_page)
    if isinstance(step, Slice):
        if not (isinstance(view, ValueView) and isinstance(view.value, list)):
            raise _misapplied(step, "a JSON array", view, reached)
        return _slice(step, view)
    if isinstance(step, Keys) and isinstance(view, KeysView):
        return _narrow_keys(step, view)
    if isinstance(step, Key) and isinstance(view, ValueView) and isinstance(view.value, list):
        return mapped(step, view.value, start=view.start, total=view.total)
    if not (isinstance(view, ValueView) and isinstance(view.value, dict)):
        raise _misapplied(step, "a JSON object", view, reached)
    if isinstance(step, Keys):
        start, stop = step.bounds(len(view.value))
        items = itertools.islice(view.value.items(), start, max(start, stop))
        return KeysView([(name, shape(value)) for name, value in items], start, len(view.value))
    if step.name not in view.value:
        raise missing_key(step, itertools.islice(view.value, 10), len(view.value))
    return ValueView(view.value[step.name])


def mapped(
    step: Key, entries: Iterable[Any], *, start: int | None = None, total: int | None = None
) -> ValueView:
    """`key:` over an array's *entries* (a slice from *start* of an array of *total*): each
    entry's value of the key, `null` for one that is not an object or lacks the key."""
    values: list[Any] = []
    missing = 0
    for entry in entries:
        present = isinstance(entry, dict) and step.name in entry  # holding null is present
        values.append(entry[step.name] if present else None)
        missing += not present
    return ValueView(values, start, total, missing)


def mapped_description(view: ValueView) -> str:
    """What `key:` over an array gave (a view with *missing*): `10 values, 2 missing`."""
    count = len(view.value)
    return f"{count} value{'' if count == 1 else 's'}, {view.missing} missing"


def missing_key(step: Key, first_names: Iterable[str], total: int) -> SelectorError:
    """The error for a key the object lacks, naming its first (up to 10) keys."""
    if not total:
        return SelectorError(f"{step}: no such key; the object has no keys")
    keys = ", ".join(display_key(k) for k in itertools.islice(first_names, 10))
    more = f" (+{total - 10} more)" if total > 10 else ""
    return SelectorError(f"{step}: no such key; the keys are: {keys}{more}")


def _narrow_keys(step: Keys, view: KeysView) -> KeysView:
    """`keys:` after `keys:` narrows; indexes still count in the whole object."""
    start, stop = step.bounds(view.total)
    start, stop = max(start, view.start), min(stop, view.start + len(view.keys))
    stop = max(stop, start)
    return KeysView(view.keys[start - view.start : stop - view.start], start, view.total)


def _as_text(view: View) -> LinesView | None:
    if isinstance(view, LinesView):
        return view
    if isinstance(view, ValueView) and isinstance(view.value, str) and view.start is None:
        total = count_lines(view.value)
        return LinesView(view.value, 1, total, total)
    return None


def _misapplied(step: Step, wanted: str, view: View, reached: str) -> SelectorError:
    name = str(step).split(":", 1)[0]
    kind = kind_of(view)
    subject = "this blob is" if reached == "this blob" else f"{reached} gives"
    return SelectorError(f"{name}: applies to {wanted}; {subject} {kind} — {suggestion(view)}")


def past_the_end(step: Lines, total: int) -> SelectorError:
    return SelectorError(f"{step}: line {step.start} is past the end; the text has {total} lines")


def _lines(step: Lines, view: LinesView) -> LinesView:
    if step.start > view.total:
        raise past_the_end(step, view.total)
    end = view.total if step.end is None else min(step.end, view.total)
    first, last = max(step.start, view.first), min(end, view.last)
    if first > last:
        raise SelectorError(f"{step}: outside the lines in view ({view.first}-{view.last})")
    return LinesView(view.text, first, last, view.total)


def _grep(step: Grep, view: LinesView, page: Page) -> GrepView:
    """Search lines first..last of the text in view, streamed as UTF-8 a chunk at a time
    (core.grep), so a big string is never encoded whole."""
    blocks = text_blocks(view.text, line_start(view.text, view.first))
    return grep_blocks(step, blocks, first=view.first, last=view.last, total=view.total, page=page)


def grep_blocks(
    step: Grep,
    blocks: Iterable[bytes],
    *,
    first: int,
    last: int | None,
    total: int | None,
    page: Page,
) -> GrepView:
    """*step* over the text whose bytes *blocks* yields from the start of line *first* (a
    string's, or a blob's file read from where its index says the line starts), through
    line *last* (None: to the end), until *page* is full. *total* is the text's line count,
    None when it is not known (then the search counts it, when it reaches the end)."""
    found = search(blocks, step.compiled, first=first, last=last, page=page)
    return GrepView(
        found.matches,
        step.pattern,
        first,
        found.last,
        found.line_count if total is None else total,
        found.complete,
        found.sizes,
        tuple(found.long_lines),
    )


def _slice(step: Slice, view: ValueView) -> ValueView:
    if view.start is None:  # the whole array
        items, offset = view.value, 0
        total = len(items)
    else:  # narrowing an earlier slice: indexes still count in the original array
        items, offset, total = view.value, view.start, view.total or 0
    start, stop = step.bounds(total)
    start, stop = max(start, offset), min(stop, offset + len(items))
    stop = max(stop, start)
    return ValueView(items[start - offset : stop - offset], start, total)
