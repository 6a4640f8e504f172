"""The live progress line `manage.py ingest` shows on a terminal, and the tallies of its
summary line.

One line, rewritten in place with a carriage return as files are ingested: files done of
the total, new items so far and their rate, and the file being read. Other output (the
lines about single files, errors) is written above it: the line is erased first and drawn
again after. Only ever used when stdout is a terminal; piped output never sees it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# "\r" goes back to the start of the line, ERASE clears what a longer line left there.
ERASE = "\x1b[K"
# Redrawing for every small file would cost more than ingesting it.
REDRAW_SECONDS = 0.1


class _Stream(Protocol):
    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


def is_terminal(stream: object) -> bool:
    """Whether *stream* (a file, or Django's OutputWrapper around one) is a terminal."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


class Unended:
    """*wrapper* (Django's OutputWrapper, which ends every write with a newline unless
    told otherwise) as a stream that writes exactly what it is given."""

    def __init__(self, wrapper: Any) -> None:
        self._wrapper = wrapper

    def write(self, text: str, /) -> object:
        return self._wrapper.write(text, ending="")

    def flush(self) -> object:
        return self._wrapper.flush()


class ProgressLine:
    """`[12/340 files] 1,234 new items, 456 items/s  path/being/read.jsonl`, rewritten in
    place on *stream* (raw: no line ending is added)."""

    def __init__(
        self,
        stream: _Stream,
        total: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        width: Callable[[], int] | None = None,
    ) -> None:
        self._stream = stream
        self._total = total
        self._clock = clock
        self._width = width or (lambda: shutil.get_terminal_size().columns)
        self._started = clock()
        self._drawn_at: float | None = None
        self._shown = False
        self._done = 0
        self._items = 0
        self._current: Path | None = None

    def text(self) -> str:
        """The line as it reads now (without control characters)."""
        elapsed = self._clock() - self._started
        rate = f", {self._items / elapsed:,.0f} items/s" if elapsed >= 0.5 else ""
        line = f"[{self._done}/{self._total} files] {self._items:,} new items{rate}"
        if self._current is not None:
            line += f"  {self._current}"
        width = max(self._width() - 1, 20)  # the last column would wrap on some terminals
        return line if len(line) <= width else line[: width - 3] + "..."

    def update(
        self, *, done: int, items: int, current: Path | None = None, force: bool = False
    ) -> None:
        """Record progress; redraw unless it was drawn less than REDRAW_SECONDS ago."""
        self._done, self._items, self._current = done, items, current
        now = self._clock()
        if force or self._drawn_at is None or now - self._drawn_at >= REDRAW_SECONDS:
            self.draw()

    def draw(self) -> None:
        self._stream.write("\r" + self.text() + ERASE)
        self._stream.flush()
        self._drawn_at = self._clock()
        self._shown = True

    def clear(self) -> None:
        """Erase the line (before other output, or at the end)."""
        if self._shown:
            self._stream.write("\r" + ERASE)
            self._stream.flush()
            self._shown = False


@dataclass
class Tally:
    """What a pass (or a watch) did, for its summary line."""

    ingested: int = 0
    failed: int = 0
    skipped: int = 0
    pruned: int = 0
    outdated: int = 0
    runs: int = 0
    runs_ingested: int = 0
    new_items: int = 0
    over_max_record: int = 0  # records skipped
    unchanged: int = 0  # files not read: as their last ingest left them


@dataclass
class PassTally(Tally):
    done: int = 0  # files handled (all of them unless stopped)

    def notes(self) -> str:
        notes = f" ({self.unchanged} unchanged, not read)" if self.unchanged else ""
        if self.skipped:
            notes += f" ({self.skipped} skipped: not recordings, or parts of one)"
        if self.pruned:
            notes += f" ({self.pruned} skipped: pruned sessions)"
        if self.outdated:
            notes += f" ({self.outdated} skipped: recorded by another importer version)"
        if self.over_max_record:
            notes += f" ({self.over_max_record} records skipped: over --max-record)"
        if self.runs:
            notes += f", {self.runs_ingested} of {self.runs} evaluation runs"
        return notes

    @staticmethod
    def unchanged_line(prefix: str, path: Path) -> str:
        """The line of a file not read: as its last ingest left it."""
        return f"{prefix}{path}: unchanged since its last ingest"

    def summary(self, files: int, seconds: float) -> str:
        """The line that ends a pass over *files* files that took *seconds*."""
        return (
            f"{self.ingested} of {files} files ingested{self.notes()}, "
            f"{self.new_items} new items, in {seconds:.1f}s"
        )
