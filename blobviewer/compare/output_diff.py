"""The diff of two steps' outputs, a bounded page at a time: however big the outputs,
a page reads the lines up to its first difference and a window of lines after it, and
shows a unified diff of that window small enough for a 200 KB page.

Page 0 finds the first line where the outputs differ, reading both in step (two stored
texts are first compared a block of bytes at a time: C-speed, and the newlines in the
equal bytes counted), then diffs at most `window` lines of each side from CONTEXT lines
before it with difflib (SequenceMatcher, the unified format's hunks with CONTEXT lines
of context). The page ends after the last stretch of equal lines in its window (so a
change cut by the window's edge is shown whole on the next page), or earlier when what
it shows reaches SHOWN_LINES lines or SHOWN_BYTES bytes; page N+1 goes on from where
page N ended, from the next difference on. Page N is found by walking pages 0..N-1
(their windows, not the lines between them: those are skipped by the byte comparison).

Lines are shown cut to SHOWN_CHARS characters (each says so, with its whole size), and
each carries its number on each side, so a page links to `lines:` of a text blob or to
the rows of a JSON blob's page (line_sources says which lines an output has).
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from itertools import islice, zip_longest
from typing import Literal

from blobviewer.compare.line_sources import (
    ComparedLine,
    LineSource,
    OpenedLines,
    View,
    equal_lines_by_bytes,
    open_pair,
)

CONTEXT = 3  # lines of context around each change, as `diff -u`
SHOWN_CHARS = 2_000  # a longer line is shown cut
# What one page shows at most: lines, and bytes of line text once escaped for HTML (so
# a page's markup, ~200 bytes a line, keeps it far under the 200 KB page limit).
SHOWN_LINES = 400
SHOWN_BYTES = 80_000

Kind = Literal["context", "added", "removed"]
_MARKS = {"context": " ", "added": "+", "removed": "-"}
Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


@dataclass(frozen=True, slots=True)
class HunkLine:
    """One line of a hunk: *kind*, its line number in A (None for an added line) and in
    B (None for a removed one), its *text* (cut to SHOWN_CHARS characters when *cut*),
    and the whole line's *size* in UTF-8 bytes."""

    kind: Kind
    a_number: int | None
    b_number: int | None
    text: str
    size: int
    cut: bool

    @property
    def mark(self) -> str:
        """The line's mark in a unified diff: `+`, `-` or a space."""
        return _MARKS[self.kind]


@dataclass(frozen=True, slots=True)
class DiffHunk:
    """A run of changes with their context: lines *a_start*.. (*a_count* of them) of A
    against *b_start*.. (*b_count*) of B, numbered as `diff -u` numbers them."""

    a_start: int
    a_count: int
    b_start: int
    b_count: int
    lines: list[HunkLine]

    @property
    def header(self) -> str:
        """`@@ -a_start,a_count +b_start,b_count @@`, as difflib.unified_diff writes it."""
        return f"@@ -{_range(self.a_start, self.a_count)} +{_range(self.b_start, self.b_count)} @@"


@dataclass(frozen=True, slots=True)
class DiffPage:
    """Page *page* of the diff of A and B.

    *identical*: the outputs are the same lines (page 0 only; no hunks then). No hunks
    and not identical: no difference is left after the pages before. *more*: the next
    page's number, when the outputs go on past this page (that page may then find no
    more differences: knowing it here would mean reading on to the end). *views*: how
    each side was read as lines ("text", "json" indented, "json_raw" a big JSON blob
    without its rendering, as stored). *a_lines*, *b_lines*: each side's line count.
    *cut_short*: the page ended before its window did, to stay small."""

    page: int
    hunks: list[DiffHunk] = field(default_factory=list)
    identical: bool = False
    more: int | None = None
    views: tuple[View, View] = ("text", "text")
    a_lines: int = 0
    b_lines: int = 0
    cut_short: bool = False

    def unified(self) -> str:
        """The page as a unified diff's hunks (no file header lines), cut lines marked."""
        out = []
        for hunk in self.hunks:
            out.append(hunk.header)
            out.extend(
                line.mark + line.text + (" [cut]" if line.cut else "") for line in hunk.lines
            )
        return "\n".join(out)


def output_diff(a: LineSource, b: LineSource, *, page: int = 0, window: int = 2000) -> DiffPage:
    """Page *page* of the unified diff of outputs *a* and *b* (see the module's
    docstring): at most *window* lines of each side are diffed, and only the lines up to
    the page's first difference and its window are read. Raises ValueError for a window
    under 2·CONTEXT+1 lines or a negative page, and the store's errors."""
    if window < 2 * CONTEXT + 1 or page < 0:
        raise ValueError(f"a window of at least {2 * CONTEXT + 1} lines and a page >= 0")
    a_lines, b_lines = open_pair(a, b)
    with a_lines, b_lines:
        empty = DiffPage(
            page,
            views=(a_lines.view, b_lines.view),
            a_lines=a_lines.line_count,
            b_lines=b_lines.line_count,
        )
        start: tuple[int, int] | None = (1, 1)
        for number in range(page + 1):
            assert start is not None
            found = _first_difference(a_lines, b_lines, *start)
            if found is None:
                return replace(empty, identical=number == 0)
            hunks, start, cut_short = _window(a_lines, b_lines, start, found, window)
            if number == page:
                more = None if start is None else page + 1
                return replace(empty, hunks=hunks, more=more, cut_short=cut_short)
            if start is None:
                break
        return empty


def _first_difference(
    a: OpenedLines, b: OpenedLines, a_first: int, b_first: int
) -> tuple[int, int] | None:
    """The line numbers (in A, in B) of the first lines from *a_first*, *b_first* on that
    differ (one side ending first counts); None when the rest is the same."""
    skipped = equal_lines_by_bytes(a, b, a_first, b_first)
    a_at, b_at = a_first + skipped, b_first + skipped
    for a_line, b_line in zip_longest(a.lines(a_at), b.lines(b_at)):
        if a_line != b_line:
            return a_at, b_at
        a_at += 1
        b_at += 1
    return None


def _window(
    a: OpenedLines,
    b: OpenedLines,
    start: tuple[int, int],
    found: tuple[int, int],
    window: int,
) -> tuple[list[DiffHunk], tuple[int, int] | None, bool]:
    """The hunks of the window at the difference *found* (the lines from *start* to it
    are the same, so up to CONTEXT of them are its context), where the next page starts
    (None: both sides end within it), and whether the page was cut short."""
    before = min(CONTEXT, found[0] - start[0])
    a_first, b_first = found[0] - before, found[1] - before
    a_part = list(islice(a.lines(a_first), window))
    b_part = list(islice(b.lines(b_first), window))
    codes = _opcodes(a_part, b_part, before)
    ends = a_first + len(a_part) > a.line_count and b_first + len(b_part) > b.line_count
    codes, stop = _up_to_last_agreement(codes, before, len(a_part), len(b_part), ends=ends)
    hunks, shown_to = _hunks(codes, a_part, b_part, a_first, b_first)
    if shown_to is not None:
        return hunks, (a_first + shown_to[0], b_first + shown_to[1]), True
    if stop is None:
        return hunks, None, False
    return hunks, (a_first + stop[0], b_first + stop[1]), False


def _opcodes(a_part: list[ComparedLine], b_part: list[ComparedLine], before: int) -> list[Opcode]:
    """difflib's opcodes for the window, whose first *before* lines are known to be the
    same on both sides: they are kept paired (difflib, looking for its longest match
    first, could pair them otherwise, and the page before showed them paired)."""
    matcher = SequenceMatcher(None, a_part[before:], b_part[before:])
    codes: list[Opcode] = [("equal", 0, before, 0, before)] if before else []
    for tag, a_lo, a_hi, b_lo, b_hi in matcher.get_opcodes():
        codes.append((tag, a_lo + before, a_hi + before, b_lo + before, b_hi + before))
    return codes


def _up_to_last_agreement(
    codes: list[Opcode], before: int, a_size: int, b_size: int, *, ends: bool
) -> tuple[list[Opcode], tuple[int, int] | None]:
    """The opcodes this page shows and where in the window the next page starts (None
    when the window holds the rest of both sides). A window that does not end both
    sides ends with its last equal lines past the first difference (on both sides, so
    each page starts further on both), so that a change its edge cut goes to the next
    page whole; the next page starts CONTEXT lines before their end, for its context.
    With no such lines, the page takes the whole window."""
    if ends:
        return codes, None
    for at in range(len(codes) - 1, -1, -1):
        tag, a_lo, a_end, _, b_end = codes[at]
        if tag == "equal" and a_end > before and b_end > before:
            back = min(CONTEXT, a_end - a_lo, a_end - before - 1, b_end - before - 1)
            return codes[: at + 1], (a_end - back, b_end - back)
    return codes, (a_size, b_size)


class _Budget:
    """What a page has shown so far, against SHOWN_LINES and SHOWN_BYTES."""

    def __init__(self) -> None:
        self.lines = 0
        self.bytes = 0
        self.changed = False  # a page shows at least one changed line, so pages move on

    def spent(self) -> bool:
        return self.changed and (self.lines >= SHOWN_LINES or self.bytes >= SHOWN_BYTES)

    def take(self, line: HunkLine) -> None:
        self.lines += 1
        self.bytes += len(html.escape(line.text).encode("utf-8", "surrogatepass"))
        self.changed = self.changed or line.kind != "context"


def _hunks(
    codes: list[Opcode],
    a_part: list[ComparedLine],
    b_part: list[ComparedLine],
    a_first: int,
    b_first: int,
) -> tuple[list[DiffHunk], tuple[int, int] | None]:
    """The hunks of *codes* as a unified diff groups them, and the window positions where
    the page stopped when what it shows reached its limits (else None)."""
    hunks: list[DiffHunk] = []
    budget = _Budget()
    for group in _grouped(codes, CONTEXT):
        lines: list[HunkLine] = []
        a_start, b_start = a_first + group[0][1], b_first + group[0][3]
        for tag, a_lo, a_hi, b_lo, b_hi in group:
            for kind, i, j in _lines_of(tag, a_lo, a_hi, b_lo, b_hi):
                if budget.spent():
                    if lines:
                        hunks.append(_hunk(lines, a_start, b_start))
                    return hunks, (a_hi if i is None else i, b_lo if j is None else j)
                shown = _shown(kind, a_part, b_part, i, j, a_first, b_first)
                budget.take(shown)
                lines.append(shown)
        hunks.append(_hunk(lines, a_start, b_start))
    return hunks, None


def _lines_of(
    tag: str, a_lo: int, a_hi: int, b_lo: int, b_hi: int
) -> Iterator[tuple[Kind, int | None, int | None]]:
    """(kind, position in A's window, in B's) of an opcode's lines: a replacement's
    removed lines before its added ones, as `diff -u` shows them."""
    if tag == "equal":
        yield from (
            ("context", i, j) for i, j in zip(range(a_lo, a_hi), range(b_lo, b_hi), strict=True)
        )
        return
    yield from (("removed", i, None) for i in range(a_lo, a_hi))
    yield from (("added", None, j) for j in range(b_lo, b_hi))


def _shown(
    kind: Kind,
    a_part: list[ComparedLine],
    b_part: list[ComparedLine],
    i: int | None,
    j: int | None,
    a_first: int,
    b_first: int,
) -> HunkLine:
    line = a_part[i] if i is not None else b_part[j]  # type: ignore[index]
    text = line.text[:SHOWN_CHARS]
    return HunkLine(
        kind,
        None if i is None else a_first + i,
        None if j is None else b_first + j,
        text,
        line.size,
        cut=line.cut or len(text) < len(line.text),
    )


def _hunk(lines: list[HunkLine], a_start: int, b_start: int) -> DiffHunk:
    a_count = sum(1 for line in lines if line.a_number is not None)
    b_count = sum(1 for line in lines if line.b_number is not None)
    return DiffHunk(a_start, a_count, b_start, b_count, lines)


def _range(start: int, count: int) -> str:
    """A hunk's range as difflib writes it: `start` alone for one line, `start-1,0` for
    none (the line after which the change goes)."""
    if count == 1:
        return str(start)
    return f"{start - 1 if count == 0 else start},{count}"


def _grouped(codes: list[Opcode], context: int) -> Iterator[list[Opcode]]:
    """The opcodes in hunks with *context* lines around each change: what
    difflib.SequenceMatcher.get_grouped_opcodes does, over a list of opcodes given
    (this page's, which may stop before the window's)."""
    codes = list(codes)
    if codes and codes[0][0] == "equal":
        tag, a_lo, a_hi, b_lo, b_hi = codes[0]
        codes[0] = tag, max(a_lo, a_hi - context), a_hi, max(b_lo, b_hi - context), b_hi
    if codes and codes[-1][0] == "equal":
        tag, a_lo, a_hi, b_lo, b_hi = codes[-1]
        codes[-1] = tag, a_lo, min(a_hi, a_lo + context), b_lo, min(b_hi, b_lo + context)
    group: list[Opcode] = []
    for tag, a_lo, a_hi, b_lo, b_hi in codes:
        if tag == "equal" and a_hi - a_lo > 2 * context:  # a long stretch: a hunk ends
            group.append((tag, a_lo, min(a_hi, a_lo + context), b_lo, min(b_hi, b_lo + context)))
            yield group
            group = []
            a_lo, b_lo = max(a_lo, a_hi - context), max(b_lo, b_hi - context)
        group.append((tag, a_lo, a_hi, b_lo, b_hi))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group
