"""`grep:` — an RE2 pattern matched per line over a text streamed in blocks (docs/selectors.md).

RE2 runs in time linear in the text whatever the pattern, so no pattern can hang a caller
and no time limit is needed. A search reads the text a block at a time (a blob, read from its
store, or the UTF-8 of a string a chunk at a time), holds at most a block and one line of at most
LINE_CAP bytes, and stops as soon as a page of hits is found. Its result says which lines
it searched (`first`..`last`), so a caller can go on after `last`.

Lines follow the line model (docs/promotion.md, core.lines): split on "\\n", one trailing "\\r"
removed, no empty line after a final "\\n". A line longer than LINE_CAP bytes is matched on
its first LINE_CAP bytes only (cut on a character boundary), and the result counts it.

How a block is searched quickly yet exactly per line: the block is cut after its last
"\\n", each "\\r\\n" becomes "\\n" (so every line is its own bytes followed by "\\n"), and
the pattern runs over the whole block once, wrapped as `(?m:...)` with RE2's `never_nl`:
`^`/`$` then match at line edges and no match can cross a newline, so a line matches on
its own exactly when the block search finds a match starting in it. Each line the block
search lands on is matched again on its own bytes before it counts. Patterns whose meaning
depends on the whole text rather than the line (`\\A`, `\\z`, a flag group that turns
`m` off) skip the block search and are matched line by line, which is exact but slower.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2
from re2 import _re2

from core.content import cut_utf8, decode_text, encode_text

if TYPE_CHECKING:
    from core.store.base import BlobReader

LINE_CAP = 4 * 1024 * 1024  # bytes of one line that are matched; the rest is not searched
BLOCK = 1 << 20  # bytes read (or encoded) at a time
_UNANCHORED = _re2.RE2.Anchor.UNANCHORED
# Text-wide anchors and turning multi-line mode off: the block search would misread them.
_WHOLE_TEXT_SYNTAX = re.compile(r"\\[Az]|\(\?[A-Za-z]*-")


class PatternError(ValueError):
    """The pattern is not RE2 syntax (or too big to compile); the message is one line."""


def _options(*, never_nl: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # errors come back as exceptions, not on stderr
    options.never_nl = never_nl
    return options


@dataclass(frozen=True, slots=True)
class Pattern:
    """A compiled grep pattern: *line* matches one line; *block* finds candidate lines in a
    block of whole lines (None when the pattern must be matched line by line)."""

    text: str
    line: _re2.RE2 = field(repr=False)
    block: _re2.RE2 | None = field(repr=False)

    def matches(self, line: bytes | memoryview) -> bool:
        """Whether the pattern matches somewhere in *line* (UTF-8, without its newline)."""
        start: int = self.line.Match(_UNANCHORED, line, 0, len(line))[0][0]
        return start >= 0


def compile_pattern(pattern: str) -> Pattern:
    """Compile *pattern* as RE2 syntax; raises PatternError with RE2's one-line reason.

    A lone surrogate in the pattern is kept as the bytes a stored text holds for it
    (`surrogatepass`), so it matches the same character in a blob.
    """
    source = encode_text(pattern)
    line = _re2.RE2(source, _options(never_nl=False))
    if not line.ok():
        raise PatternError(decode_text(line.error()).replace("\n", " "))
    block = None
    if not _WHOLE_TEXT_SYNTAX.search(pattern):
        block = _re2.RE2(b"(?m:" + source + b")", _options(never_nl=True))
        if not block.ok():  # cannot happen for a pattern that compiled alone; be exact anyway
            block = None
    return Pattern(pattern, line, block)


@dataclass(frozen=True, slots=True)
class Page:
    """When a search stops: once the matches, each shown as `<n>: <line>` plus a newline,
    would pass *max_bytes* (the first match is always kept), or after *max_matches*.
    Each matching line is kept up to *line_bytes* bytes; its whole size is recorded."""

    max_bytes: int
    max_matches: int | None = None
    line_bytes: int = 8000


@dataclass(slots=True)
class Found:
    """What a search found in lines *first*..*last* (all of them searched)."""

    matches: list[tuple[int, str]]  # (line number, the line, or its start when cut)
    sizes: dict[int, int]  # a cut line's whole size in bytes, by line number
    first: int
    last: int  # the last line searched; first - 1 when none was
    complete: bool  # the search reached the end of the lines it was asked to search
    line_count: int | None  # the text's line count, when the search reached its end
    long_lines: list[int]  # lines longer than LINE_CAP (matched on their first part only)


class _Search:
    """The state of one search: the page being filled and the line being counted."""

    def __init__(self, pattern: Pattern, first: int, last: int | None, page: Page) -> None:
        self.pattern = pattern
        self.number = first  # the line that starts at the next byte to process
        self.first = first
        self.stop_after = last
        self.page = page
        self.matches: list[tuple[int, str]] = []
        self.sizes: dict[int, int] = {}
        self.used = 0
        self.full = False  # stopped early: a page of hits is found
        self.long_lines: list[int] = []

    # -- results ----------------------------------------------------------------------

    def add(self, number: int, line: bytes | memoryview, size: int) -> bool:
        """Keep a matching line; False (and nothing kept) when it would overflow the page."""
        page = self.page
        cost = len(str(number)) + 3 + size
        if self.matches and (
            self.used + cost > page.max_bytes
            or (page.max_matches is not None and len(self.matches) >= page.max_matches)
        ):
            self.full = True
            return False
        kept = bytes(line[: page.line_bytes + 1])  # one byte more: cut_utf8 looks at it
        if len(kept) < size or len(kept) > page.line_bytes:
            kept = cut_utf8(kept, page.line_bytes)
            self.sizes[number] = size
        self.matches.append((number, decode_text(kept)))
        self.used += cost
        return True

    def past_range(self, number: int) -> bool:
        return self.stop_after is not None and number > self.stop_after

    # -- lines ------------------------------------------------------------------------

    def whole_lines(self, data: bytes, begin: int, stop: int) -> bool:
        """Search data[begin:stop]: whole lines, each ending with "\\n" (raw, "\\r" not yet
        removed), none longer than LINE_CAP, after a "\\n" (or at the start of *data*). False
        once the search is over (page full or range end). Nothing is copied unless a
        "\\r" is there to remove: a block is searched where it lies."""
        if data.find(b"\r", begin, stop) >= 0:
            data = data[begin:stop].replace(b"\r\n", b"\n")
            begin, stop = 0, len(data)
        end = stop
        if self.stop_after is not None:
            wanted = self.stop_after - self.number + 1  # lines of this block still in range
            if wanted <= 0:
                return False
            if data.count(b"\n", begin, stop) > wanted:
                end = _after_nth_newline(data, wanted, begin)
        if self.pattern.block is None:
            return self._line_by_line(data, begin, end) and end == stop
        block = self.pattern.block
        view = memoryview(data)
        counted = begin  # bytes whose newlines are already in self.number
        position = begin
        while position < end:
            start = block.Match(_UNANCHORED, data, position, end)[0][0]
            if start < 0 or start >= end:
                break
            line_start = data.rfind(b"\n", begin, start) + 1 or begin
            line_end = data.find(b"\n", start)
            self.number += data.count(b"\n", counted, line_start)
            counted = line_start
            line = view[line_start:line_end]
            if self.pattern.matches(line) and not self.add(self.number, line, len(line)):
                return False
            position = line_end + 1
        self.number += data.count(b"\n", counted, end)
        return end == stop

    def _line_by_line(self, data: bytes, start: int, end: int) -> bool:
        view = memoryview(data)
        while start < end:
            line_end = data.index(b"\n", start)
            line = view[start:line_end]
            if self.pattern.matches(line) and not self.add(self.number, line, len(line)):
                return False
            self.number += 1
            start = line_end + 1
        return True

    def last_line(self, line: bytes) -> bool:
        """One line, without its newline and trailing "\\r"."""
        if self.pattern.matches(line) and not self.add(self.number, line, len(line)):
            return False
        self.number += 1
        return True

    def long_line(self, head: bytes, size: int) -> bool:
        """A line of *size* bytes (its trailing "\r" already left out) of which *head* holds
        at least the first min(size, LINE_CAP + 1) bytes. A line longer than LINE_CAP is
        matched on its first LINE_CAP bytes only, cut on a character boundary."""
        if size <= LINE_CAP:  # only its "\r" made it look long
            return self.last_line(head[:size])
        self.long_lines.append(self.number)
        searched = cut_utf8(head[: LINE_CAP + 1], LINE_CAP)
        if self.pattern.matches(searched) and not self.add(self.number, searched, size):
            return False
        self.number += 1
        return True


def _after_nth_newline(data: bytes, count: int, start: int = 0) -> int:
    position = start - 1
    for _ in range(count):
        position = data.index(b"\n", position + 1)
    return position + 1


def search(
    blocks: Iterable[bytes],
    pattern: Pattern,
    *,
    first: int = 1,
    last: int | None = None,
    page: Page,
) -> Found:
    """Search the text whose bytes *blocks* yields, from the start of line *first* (the
    first byte *blocks* yields), through line *last* (None: to the end), until *page* is full.

    *blocks* may cut the text anywhere, even inside a character; at most one block and one
    line of LINE_CAP bytes are held at a time. The result's line count is known when the
    search read to the end of the text (and assumes *blocks* started at line *first*).
    """
    state = _Search(pattern, first, last, page)
    reached_end = _run(state, _at_most_a_line_cap(blocks))
    # state.number is the line after the last one searched: when the page is full, the line
    # whose match did not fit, which is where the next search starts.
    searched_to = state.number - 1
    if last is not None:
        searched_to = min(searched_to, last)
    complete = not state.full and (reached_end or state.past_range(state.number))
    return Found(
        state.matches,
        state.sizes,
        first,
        searched_to,
        complete,
        state.number - 1 if reached_end and not state.full else None,
        state.long_lines,
    )


def _run(state: _Search, blocks: Iterator[bytes]) -> bool:
    """Feed *blocks* to *state*; True when the end of the text was reached.

    A block is searched where it lies; only the line it shares with the block before it
    (the carry) is put together, so no block is copied.
    """
    carry = b""  # the start of a line whose end has not been read yet
    pending: bytes | None = None  # bytes read past a long line, to be searched next
    while True:
        block: bytes | None
        if pending is not None:
            block, pending = pending, None
        elif (block := next(blocks, None)) is None:
            break
        if state.past_range(state.number):
            return False
        begin = 0
        if carry:
            newline = block.find(b"\n")
            if newline < 0:
                if len(carry) + len(block) <= LINE_CAP:
                    carry += block
                    continue
                # A line too long to hold: match its head, then read on to its end.
                outcome = _skip_long_line(state, carry + block, blocks)
                if outcome is None:
                    return True
                going_on, pending = outcome
                if not going_on:
                    return False
                carry = b""
                continue
            line = carry + block[: newline + 1]
            carry = b""
            begin = newline + 1
            if len(line) > LINE_CAP + 1:
                size = len(line) - 1 - (line[-2:-1] == b"\r")
                if not state.long_line(line[: LINE_CAP + 1], size):
                    return False
            elif not state.whole_lines(line, 0, len(line)):
                return False
        cut = block.rfind(b"\n", begin)
        if cut < 0:
            carry = block[begin:]  # a block holds no line longer than LINE_CAP
            continue
        if not state.whole_lines(block, begin, cut + 1):
            return False
        carry = block[cut + 1 :]
    if carry:
        if state.past_range(state.number):
            return False
        size = len(carry) - carry.endswith(b"\r")
        return state.long_line(carry[: LINE_CAP + 1], size)
    return True


def _at_most_a_line_cap(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """*blocks*, a big one cut in pieces, so that a line that lies wholly inside one piece
    is never longer than LINE_CAP (only a block's first line needs checking)."""
    for block in blocks:
        if len(block) <= LINE_CAP:
            yield block
            continue
        for start in range(0, len(block), LINE_CAP):
            yield block[start : start + LINE_CAP]


def _skip_long_line(
    state: _Search, head: bytes, blocks: Iterator[bytes]
) -> tuple[bool, bytes] | None:
    """Match the head of a line longer than LINE_CAP and read on to its end, one block at a
    time: (whether the search goes on, the bytes after the line), or None when the text
    ended inside the line."""
    size = len(head)
    before = head[-1:]  # the byte before the next block
    kept = head[: LINE_CAP + 1]
    for block in blocks:
        newline = block.find(b"\n")
        if newline < 0:
            size += len(block)
            before = block[-1:] or before
            continue
        size += newline
        if (block[newline - 1 : newline] if newline else before) == b"\r":
            size -= 1  # the line model drops one trailing "\r"
        return state.long_line(kept, size), block[newline + 1 :]
    state.long_line(kept, size - (before == b"\r"))
    return None


# -- sources ----------------------------------------------------------------------------------


def blob_blocks(blob: BlobReader, first: int = 1, *, start: int = 0) -> Iterator[bytes]:
    """The bytes of *blob* from offset *start* and then from the start of line *first*
    (counted from *start*), a block at a time; lines before it are only counted (C speed),
    never held whole."""
    blocks = blob.blocks(start, BLOCK)
    skip = first - 1  # newlines to pass
    if skip > 0:
        for block in blocks:
            found = block.count(b"\n")
            if found < skip:
                skip -= found
                continue
            yield block[_after_nth_newline(block, skip) :]
            break
    yield from blocks


def text_blocks(text: str, start: int = 0) -> Iterator[bytes]:
    """The UTF-8 of *text* from offset *start*, a chunk of about BLOCK characters at a
    time, so a big string is never encoded whole (lone surrogates kept, as the store does)."""
    for position in range(start, len(text), BLOCK):
        yield encode_text(text[position : position + BLOCK])


def count_lines_in(blob: BlobReader) -> int:
    """The line count of the text *blob* reads, a block at a time."""
    newlines = 0
    last = b""
    for block in blob.blocks(0, BLOCK):
        newlines += block.count(b"\n")
        last = block[-1:]
    return newlines + (1 if last not in (b"", b"\n") else 0)
