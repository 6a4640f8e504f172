"""The inspect cap: a result never exceeds ``policy.inspect_limit`` bytes (docs/selectors.md).

A result is a header line and *units*: runs of output lines kept or dropped whole, each
with the selector that resumes the output at it. :func:`cap` keeps the units that fit,
keeping room for what must follow (the trailer `… truncated — continue with <selector>`
that names where to read on); a first unit too big to fit alone shows its start.
:func:`bounded` is the last guard, for a header or selector too long to name within it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from core.content import cut_utf8, decode_text, encode_text, utf8_size
from core.selectors import Selector, Step
from core.summary import ELLIPSIS

# The selector that resumes an output at a unit: only ever written out (in a trailer), so
# a run of numbered units gives it as text made cheaply (resumes) rather than a Selector.
Resume = Selector | str


class OutputUnit(NamedTuple):  # a NamedTuple: made by the hundred for every call
    """A run of output lines that is kept or dropped whole, and the selector that resumes
    the output at it. A single-line unit that alone exceeds the limit is cut."""

    lines: list[str]
    resume: Resume | None
    label: str = "line"  # how the note on a cut line names it
    size: int | None = None  # a one-line unit's full size when `lines` holds only its start


# A unit before it is read: its resume selector (known without reading the blob), and
# what reads it. Only the units the cap can reach are read.
Pending = tuple[Resume | None, Callable[[], OutputUnit]]


def unit_size(unit: OutputUnit) -> int:
    """The bytes *unit* takes in the output, its newline included."""
    lines = unit.lines
    if unit.size is not None:
        return 1 + unit.size
    if len(lines) == 1:
        return 1 + utf8_size(lines[0])
    return sum(1 + utf8_size(line) for line in lines)


def resumes(prefix: Selector, step: Callable[[int], Step]) -> Callable[[int], str]:
    """The resume selector of numbered unit n, `prefix | step(n)`, as text: the prefix is
    written once for the whole run."""
    head = f"{prefix} | " if prefix else ""
    return lambda n: head + str(step(n))


def _itself(unit: OutputUnit) -> OutputUnit:
    return unit


def ready(units: Iterable[OutputUnit]) -> Iterator[Pending]:
    """Units already read, as pending ones."""
    for unit in units:
        yield unit.resume, functools.partial(_itself, unit)


def enough(pending: Iterable[Pending], limit: int) -> tuple[list[OutputUnit], list[int]]:
    """The units :func:`cap` can reach, and their sizes: read until their lines alone pass
    *limit*, then the next unit that names a resume selector, as a stand-in without
    content (cap only reads its selector, for the trailer)."""
    units: list[OutputUnit] = []
    sizes: list[int] = []
    total = 0
    for resume, load in pending:
        if total > limit and resume is not None:
            units.append(OutputUnit([], resume))
            sizes.append(0)
            break
        unit = load()
        units.append(unit)
        sizes.append(size := unit_size(unit))
        total += size
    return units, sizes


def cap(
    header: str, units: list[OutputUnit], more: str | None, limit: int, sizes: list[int]
) -> str:
    """Join header and units, stopping at the last whole unit that fits in *limit* bytes
    (*sizes*: the units' sizes).

    While adding a unit, room is kept for whatever must follow it: the `more` line after
    the last unit, else the trailer that would resume at the next unit.
    """
    out = [header]
    size = utf8_size(header)
    last = len(units) - 1
    for index, unit in enumerate(units):
        size_of_unit = sizes[index]
        if index < last:
            reserve = trailer_size(units[index + 1].resume)
        else:
            reserve = 1 + utf8_size(more) if more else 0
        if size + size_of_unit + reserve <= limit:
            out += unit.lines
            size += size_of_unit
            continue
        if index == last and size + size_of_unit <= limit:
            out += unit.lines  # the whole content fits without the hint line
            return "\n".join(out)
        if len(out) == 1:  # nothing of the body fits whole: show its start
            return "\n".join(out + _cut_unit(unit, units[index + 1 :], limit - size, more))
        if unit.resume is not None:
            out.append(trailer(unit.resume))
        return "\n".join(out)
    if more:
        out.append(more)
    return "\n".join(out)


def _cut_unit(
    unit: OutputUnit, rest: list[OutputUnit], room: int, more: str | None = None
) -> list[str]:
    """The part of a too-big first unit that fits in *room* bytes, and where to go on."""
    if len(unit.lines) > 1:
        resume = unit.resume  # resuming at it drills into the entry, rendered differently
        reserve = trailer_size(resume)
        shown: list[str] = []
        for line in unit.lines:
            if (needed := 1 + utf8_size(line)) + reserve > room:
                break
            shown.append(line)
            room -= needed
        return shown + ([trailer(resume)] if resume else [])
    line = unit.lines[0]
    after = next((u.resume for u in rest if u.resume is not None), None)
    tail = [trailer(after)] if after else [more] if more and not rest else []
    full = utf8_size(line) if unit.size is None else unit.size
    note = f"{ELLIPSIS} this {unit.label} is {full} bytes; only its start is shown"
    room -= 1 + (1 + utf8_size(note)) + sum(1 + utf8_size(t) for t in tail)
    cut = cut_utf8(encode_text(line[: max(room, 0)]), max(room - len(ELLIPSIS.encode()), 0))
    return [decode_text(cut) + ELLIPSIS, note, *tail]


def bounded(result: str, limit: int) -> str:
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


def trailer(resume: Resume) -> str:
    """The last line of a cut result: the selector that reads on from *resume*."""
    return f"{_TRAILER}{resume}"


def trailer_size(resume: Resume | None) -> int:
    """The bytes the trailer that resumes at *resume* takes, its newline included (0
    without one)."""
    return 1 + _TRAILER_SIZE + utf8_size(str(resume)) if resume else 0
