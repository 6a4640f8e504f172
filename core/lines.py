"""The line model shared by summaries, `lines:` and the viewer.

A text is split on "\\n"; one trailing "\\r" is removed from each line; a final "\\n" does
not start an empty last line. "" has 0 lines, "a" and "a\\n" have 1, "a\\n\\nb" has 3.
"""

from __future__ import annotations

from collections.abc import Iterator

# Counting in chunks keeps the C-speed str.count on huge texts while walking to a line.
_CHUNK = 1 << 20


def count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _strip_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def split_lines(text: str) -> list[str]:
    if not text:
        return []
    parts = text.split("\n")
    if text.endswith("\n"):
        parts.pop()
    return [_strip_cr(part) for part in parts]


def line_start(text: str, number: int) -> int:
    """Offset in *text* where line *number* (1-based) starts; len(text) if past the end."""
    remaining = number - 1  # newlines to walk past
    position = 0
    size = len(text)
    while remaining > 0:
        if position >= size:
            return size
        end = min(position + _CHUNK, size)
        found = text.count("\n", position, end)
        if found < remaining:
            remaining -= found
            position = end
            continue
        for _ in range(remaining):
            position = text.index("\n", position, end) + 1
        return position
    return position


def line_slice(text: str, start: int, end: int) -> list[str]:
    """Lines *start*..*end* (1-based, inclusive, end clamped) without splitting all of *text*."""
    if end < start:
        return []
    begin = line_start(text, start)
    if begin >= len(text):
        return []
    stop = begin
    for _ in range(end - start + 1):
        newline = text.find("\n", stop)
        if newline < 0:
            stop = len(text)
            break
        stop = newline + 1
    return split_lines(text[begin:stop])


def iter_lines(text: str, start: int, end: int) -> Iterator[tuple[int, str]]:
    """(number, line) for lines *start*..*end*, split a chunk at a time: C speed, without
    holding a list of every line of a huge text."""
    position = line_start(text, start)
    number = start
    size = len(text)
    while number <= end and position < size:
        stop = text.find("\n", min(position + _CHUNK, size))
        stop = size if stop < 0 else stop + 1
        for line in split_lines(text[position:stop]):
            if number > end:
                return
            yield number, line
            number += 1
        position = stop


def head_lines(text: str, count: int) -> list[str]:
    return line_slice(text, 1, count)


def tail_lines(text: str, count: int) -> list[str]:
    """The last *count* lines, found by walking back from the end of the text."""
    if count <= 0 or not text:
        return []
    end = len(text) - 1 if text.endswith("\n") else len(text)
    begin = end
    for _ in range(count):
        begin = text.rfind("\n", 0, begin)
        if begin < 0:
            break
    return [_strip_cr(line) for line in text[begin + 1 : end].split("\n")]
