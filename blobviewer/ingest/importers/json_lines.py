"""Reading a JSON Lines recording a record at a time, as its agent may still be writing it.

Every importer of a format that appends one JSON value a line (our own session logs,
Claude Code, Codex CLI rollouts, Gemini CLI's `.jsonl` sessions, OpenHands evaluation
outputs) reads through JsonLines. The file is read a block at a time and a line's length
is measured before the line is read whole:

- a line longer than the record cap (`manage.py ingest --max-record`, 256 MB unless told:
  docs/recording.md#big-records) is passed over without its bytes being kept, and reported
  as a SkippedRecord; the lines after it are read as usual;
- a line longer than LONG_LINE is parsed from the file by long_lines (its long strings
  decoded as they are read), so it costs about its own size in memory;
- any other line is parsed from its bytes, with orjson where it reads as json does
  (blobviewer.ingest.importers.recording.load_json_record).

A line is split off at `\\n`; a `\\r` before it (a file written on Windows) is JSON
whitespace and needs no special case. The last line, when no newline follows it, may be
one the recorder is still writing (Line.unterminated): each importer leaves such a line out
when it does not parse, to be read once it is complete.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from blobviewer.ingest.importers.long_lines import BLOCK, Parse, read_long_value
from blobviewer.ingest.importers.recording import RecordingError, load_json_record

# What `manage.py ingest --max-record` is unless told: a record (a line, or a document
# read whole) larger than this is skipped.
DEFAULT_MAX_RECORD = 256 << 20
# A line longer than this is parsed from the file a block at a time (long_lines).
LONG_LINE = 4 * BLOCK
# The blocks a read that resumes reads from the start in (RecordingText.resume).
HEADER_BLOCK = 64 << 10
# How much of a line that does not parse is kept (Line.head), for telling formats apart.
HEAD = 256


def megabytes(size: int) -> str:
    """*size* (bytes) for people: `300 MB`, `1.5 MB`."""
    value = size / (1 << 20)
    return f"{value:,.0f} MB" if value >= 10 else f"{value:.1f} MB"


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMG]?)B?", re.IGNORECASE)
_UNITS = {"K": 1 << 10, "": 1 << 20, "M": 1 << 20, "G": 1 << 30}


def size_in_bytes(text: str) -> int:
    """A size as `--max-record` takes it: MB, or a number with K, M or G (`256M`, `1.5G`,
    `512KB`); raises ValueError."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or float(match[1]) <= 0:
        raise ValueError(f"{text!r}: give a size such as 256M, 512K or 2G")
    return int(float(match[1]) * _UNITS[match[2].upper()])


@dataclass(frozen=True)
class SkippedRecord:
    """A record over the cap that was passed over: which file, which line (None for a
    document read whole), how big it is and what the cap was."""

    path: str
    line: int | None
    size: int
    limit: int

    def __str__(self) -> str:
        where = f"{self.path}: line {self.line}: record" if self.line else f"{self.path}: document"
        return (
            f"{where} of {megabytes(self.size)} is over --max-record "
            f"({megabytes(self.limit)}); skipped"
        )


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a JSON Lines file: its value, or why it did not parse."""

    number: int  # 1-based
    value: Any = None
    plain_floats: bool = False  # see load_json_record
    error: str | None = None  # the parser's message, when the line is not JSON
    unterminated: bool = False  # the file's last line, no newline after it (yet)
    head: bytes = b""  # the first bytes of a line that did not parse
    blank: bool = False  # nothing but whitespace (only with JsonLines(keep_blank=True))
    end: int = 0  # where in the file the line ends (after its newline)


class JsonLines:
    """The lines of a JSON Lines *file*, read from where it is (see the module's
    docstring); lines over *max_record* bytes go to *skipped* instead. Blank lines are
    passed over unless *keep_blank*. *first_number* is the number of the first line read."""

    def __init__(
        self,
        file: BinaryIO,
        path: Path,
        *,
        max_record: int = DEFAULT_MAX_RECORD,
        parse: Parse = load_json_record,
        skipped: dict[int, SkippedRecord] | None = None,
        keep_blank: bool = False,
        first_number: int = 1,
        block: int = BLOCK,
    ) -> None:
        self._file = file
        self._block = block
        self.path = path
        self.max_record = max_record
        self._parse = parse
        self.skipped: dict[int, SkippedRecord] = {} if skipped is None else skipped
        self._keep_blank = keep_blank
        self._first_number = first_number

    def __iter__(self) -> Iterator[Line]:
        number = self._first_number - 1
        position = self._file.tell()  # where the next block is read from
        start = position  # where the line being read starts
        kept: list[bytes] = []  # its bytes so far, while no longer than LONG_LINE
        size = 0  # its length so far
        head = b""  # its first bytes
        while True:
            self._file.seek(position)  # a long line, or the caller, may have moved it
            block = self._file.read(self._block)
            if not block:
                break
            position += len(block)
            at = 0
            while (newline := block.find(b"\n", at)) >= 0:
                number += 1
                length = size + newline - at
                raw = None
                if length <= LONG_LINE:
                    raw = block[at:newline] if not kept else b"".join([*kept, block[at:newline]])
                line = self._line(number, raw, start, length, head)
                if line is not None:
                    yield line
                at = newline + 1
                start, kept, size, head = position - len(block) + at, [], 0, b""
            if at < len(block):
                if not size:
                    head = block[at : at + HEAD]
                size += len(block) - at
                kept = [*kept, block[at:]] if size <= LONG_LINE else []
        if size:
            raw = b"".join(kept) if size <= LONG_LINE else None
            line = self._line(number + 1, raw, start, size, head, unterminated=True)
            if line is not None:
                yield line

    def _line(
        self,
        number: int,
        raw: bytes | None,
        start: int,
        length: int,
        head: bytes,
        *,
        unterminated: bool = False,
    ) -> Line | None:
        """Line *number*: *length* bytes at *start*, which are *raw* unless the line is
        longer than LONG_LINE (None: read again from the file, *head* its first bytes);
        None when it is passed over."""
        end = start + length + (not unterminated)
        if raw is not None and not raw.strip():
            if not self._keep_blank:
                return None
            return Line(number, blank=True, unterminated=unterminated, end=end)
        if length > self.max_record:
            self.skipped[number] = SkippedRecord(str(self.path), number, length, self.max_record)
            return None
        try:
            if raw is not None:
                value, plain_floats = self._parse(raw)
            else:
                self._file.seek(start)
                value, plain_floats = read_long_value(self._file, length, self._parse)
        except (ValueError, RecursionError) as error:
            head = raw[:HEAD] if raw is not None else head
            return Line(number, error=str(error), unterminated=unterminated, head=head, end=end)
        return Line(number, value, plain_floats, unterminated=unterminated, end=end)


def read_json_lines(path: Path, data: bytes | RecordingText) -> list[tuple[int, dict[str, Any]]]:
    """The objects of *data* (a recording's bytes, or the file being read), one a line,
    each with its 1-based line number; lines over the record cap are passed over.

    A last line without its newline that does not parse is a line the recorder is still
    writing: it is left out, to be read once it is complete. Any other line that is not
    a JSON object raises RecordingError naming `path:line`.
    """
    entries: list[tuple[int, dict[str, Any]]] = []
    for line in RecordingText.of(path, data).lines():
        if line.error is not None:
            if line.unterminated:  # still being written
                break
            raise RecordingError(path, line.number, f"not JSON: {line.error}")
        if not isinstance(line.value, dict):
            raise RecordingError(path, line.number, "each line must be a JSON object")
        entries.append((line.number, line.value))
    return entries


class RecordingText:
    """The bytes of one recording file, read a line at a time (lines) or as one JSON
    document (document): a file being read, or bytes already in memory. Records over
    *max_record* are passed over and gathered in `skipped` (each once, however often the
    file is read)."""

    def __init__(
        self,
        path: Path,
        file: BinaryIO,
        *,
        max_record: int = DEFAULT_MAX_RECORD,
        resume: tuple[int, int] | None = None,
    ):
        self.path = path
        self._file = file
        self.max_record = max_record
        self._skipped: dict[int, SkippedRecord] = {}
        self._first: Line | None = None
        self._first_read = False
        # A read that goes on from where an earlier one ended reads from the start (the
        # header line) in small blocks: not the start of a long log again.
        self._block = HEADER_BLOCK if resume is not None else BLOCK
        # (offset, lines): where lines() goes on after the first line, numbering from
        # lines + 1: the end of what an earlier read of a file that has since grown read.
        self.resume = resume
        # (offset, lines) after the last whole line lines() yielded: where a read of this
        # file once it has grown may go on.
        self.consumed = (0, 0)
        self.taken_torn = False

    @classmethod
    def of(cls, path: Path, data: bytes | RecordingText) -> RecordingText:
        """*data* itself when it is a RecordingText, else its bytes, read from memory."""
        return data if isinstance(data, RecordingText) else cls(path, io.BytesIO(data))

    @classmethod
    @contextmanager
    def open(
        cls,
        path: Path,
        *,
        max_record: int = DEFAULT_MAX_RECORD,
        resume: tuple[int, int] | None = None,
    ) -> Iterator[RecordingText]:
        """The file at *path*, open while in the block (*resume*: see __init__); a file
        that cannot be opened or read raises RecordingError (`path: cannot read: ...`)."""
        try:
            file = path.open("rb")
        except OSError as error:
            raise RecordingError(path, None, f"cannot read: {error.strerror}") from None
        with file:
            try:
                yield cls(path, file, max_record=max_record, resume=resume)
            except OSError as error:  # a read that failed midway
                raise RecordingError(path, None, f"cannot read: {error.strerror}") from None

    @property
    def skipped(self) -> list[SkippedRecord]:
        """The records passed over so far, in line order (a document's has no line)."""
        return sorted(self._skipped.values(), key=lambda record: record.line or 0)

    def lines(self, *, parse: Parse = load_json_record, keep_blank: bool = False) -> Iterator[Line]:
        """Every line (see JsonLines), from the first; the first line that is not blank
        is the one first() read, not read again, when *parse* is the default. A read
        that resumes gives that first line (the header), then the lines after `resume`."""
        if parse is not load_json_record:
            self._forget_first()
        first = self.first() if parse is load_json_record else None
        if first is None:
            self._file.seek(0)
            if self.resume is None:
                yield from self._counted(self._json_lines(parse, keep_blank, first_number=1))
                return
            first = next(iter(self._json_lines(parse, keep_blank, first_number=1)), None)
            if first is None:
                return
        elif keep_blank:
            for number in range(1, first.number):
                if number not in self._skipped:
                    yield Line(number, blank=True)
        yield from self._counted([first])
        if self.resume is not None:  # the header's end is before where the read resumes
            self.consumed = self.resume
        offset, number = self.resume or (first.end, first.number)
        self._file.seek(offset)
        yield from self._counted(self._json_lines(parse, keep_blank, number + 1))

    def _counted(self, lines: Iterable[Line]) -> Iterator[Line]:
        """*lines*, keeping `consumed` at the end of the last whole one, and `taken_torn`
        whether a last line without its newline parsed (a reader took it: a read that
        resumes from `consumed` would read it twice)."""
        for line in lines:
            if not line.unterminated:
                self.consumed = (line.end, line.number)
            elif line.error is None and not line.blank:
                self.taken_torn = True
            yield line

    def first(self) -> Line | None:
        """The first line that is not blank (its value, or why it did not parse), or None
        when there is none: an empty file, or one whose every line is over the cap."""
        if not self._first_read:
            self._file.seek(0)
            self._first = next(iter(self._json_lines(load_json_record, False, 1)), None)
            self._first_read = True
        return self._first

    def _forget_first(self) -> None:
        """Drop the first line first() read: another parser reads it again, and a long
        line must not be held twice."""
        self._first, self._first_read = None, False

    def document(self) -> Any:
        """The whole text as one JSON value; raises ValueError (not JSON), or
        RecordTooLarge when the text is over the cap (it is then in `skipped`)."""
        first = self.first()
        size = self._file.seek(0, io.SEEK_END)
        if first is not None and first.end >= size or self._blank_after(first):
            if first is None or first.error is not None:
                raise ValueError(first.error if first is not None else "empty")
            return first.value  # a document on one line: already read
        if size > self.max_record:
            self._skipped[0] = SkippedRecord(str(self.path), None, size, self.max_record)
            raise RecordTooLarge(str(self._skipped[0]))
        self._file.seek(0)
        if size <= LONG_LINE:
            return load_json_record(self._file.read())[0]
        return read_long_value(self._file, size, load_json_record)[0]

    def _blank_after(self, first: Line | None) -> bool:
        """Whether nothing but whitespace follows *first* (the first line that is not blank)."""
        if first is None:
            return False
        self._file.seek(first.end)
        while block := self._file.read(self._block):
            if block.strip():
                return False
        return True

    def _json_lines(self, parse: Parse, keep_blank: bool, first_number: int) -> JsonLines:
        return JsonLines(
            self._file,
            self.path,
            max_record=self.max_record,
            parse=parse,
            skipped=self._skipped,
            keep_blank=keep_blank,
            first_number=first_number,
            block=self._block,
        )


class RecordTooLarge(ValueError):
    """A recording read whole (one JSON document) is over the record cap."""
