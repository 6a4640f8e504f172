"""`manage.py ingest` on a terminal shows a live progress line (files done of the total,
new items and their rate) rewritten in place; piped, its output is the per-file lines and
the summary only, exactly as before."""

from __future__ import annotations

import re
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from blobviewer.ingest.progress import ERASE, ProgressLine
from web.records import header, user_item

pytestmark = pytest.mark.django_db


class Terminal(StringIO):
    """What the command writes to a terminal, kept as written."""

    def isatty(self) -> bool:
        return True


def ingest(*paths: Path, stdout: StringIO) -> str:
    call_command("ingest", *map(str, paths), stdout=stdout, stderr=stdout)
    return stdout.getvalue()


@pytest.fixture
def logs(write_log) -> list[Path]:
    return [
        write_log([header(uuid.uuid4()), *(user_item(n, f"step {n}") for n in range(1, 4))])
        for _ in range(3)
    ]


def shown(output: str) -> list[str]:
    """The lines a terminal ends up showing: a carriage return takes the cursor back to the
    start of the line, ERASE clears from the cursor to the end, text overwrites."""
    rows: list[list[str]] = [[]]
    column = 0
    for part in re.split(r"(\n|\r|\x1b\[K)", output):
        if part == "\n":
            rows.append([])
            column = 0
        elif part == "\r":
            column = 0
        elif part == ERASE:
            del rows[-1][column:]
        else:
            for char in part:
                if column < len(rows[-1]):
                    rows[-1][column] = char
                else:
                    rows[-1].append(char)
                column += 1
    return ["".join(row) for row in rows if row]


def test_on_a_terminal_a_progress_line_is_rewritten_in_place(logs: list[Path]) -> None:
    output = ingest(*logs, stdout=Terminal())

    drawn = re.findall(r"\r(\[\d+/3 files\][^\r\x1b]*)\x1b\[K", output)
    assert drawn, output
    assert drawn[0].startswith("[0/3 files] 0 new items  ")
    assert any(line.startswith("[2/3 files] 6 new items") for line in drawn)
    assert all(str(path) in output for path in logs)
    # Once done, the terminal shows the per-file lines and the summary, no progress line.
    lines = shown(output)
    assert [line.split(":")[0] for line in lines[:3]] == [
        f"[{n}/3] {path}" for n, path in enumerate(logs, start=1)
    ]
    assert lines[3].startswith("3 of 3 files ingested, 9 new items")
    assert len(lines) == 4


def test_on_a_terminal_files_that_added_nothing_are_counted_not_listed(logs: list[Path]) -> None:
    ingest(*logs, stdout=StringIO())

    lines = shown(ingest(*logs, stdout=Terminal()))

    assert len(lines) == 1
    assert lines[0].startswith("3 of 3 files ingested (3 unchanged, not read), 0 new items")


def test_piped_the_output_is_the_per_file_lines_and_the_summary(logs: list[Path]) -> None:
    output = ingest(*logs, stdout=StringIO())

    assert "\r" not in output and "\x1b" not in output
    lines = output.splitlines()
    assert lines[:3] == [
        f"[{n}/3] {path}: +3 items (3 in all), 0 blobs" for n, path in enumerate(logs, start=1)
    ]
    assert re.fullmatch(r"3 of 3 files ingested, 9 new items, in \d+\.\ds", lines[3])
    assert len(lines) == 4

    again = ingest(*logs, stdout=StringIO()).splitlines()
    assert again[0] == f"[1/3] {logs[0]}: unchanged since its last ingest"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_progress_line_says_files_items_their_rate_and_the_file_being_read() -> None:
    clock, stream = Clock(), Terminal()
    progress = ProgressLine(stream, 340, clock=clock, width=lambda: 200)

    progress.update(done=0, items=0, current=Path("runs/a.jsonl"))
    clock.now += 4
    progress.update(done=12, items=1234, current=Path("runs/b.jsonl"), force=True)

    assert progress.text() == "[12/340 files] 1,234 new items, 308 items/s  runs/b.jsonl"
    assert stream.getvalue() == (
        f"\r[0/340 files] 0 new items  runs/a.jsonl{ERASE}"
        f"\r[12/340 files] 1,234 new items, 308 items/s  runs/b.jsonl{ERASE}"
    )
    progress.clear()
    assert stream.getvalue().endswith(f"\r{ERASE}")


def test_the_progress_line_fits_the_terminal_and_is_not_redrawn_for_every_file() -> None:
    clock, stream = Clock(), Terminal()
    progress = ProgressLine(stream, 5, clock=clock, width=lambda: 40)
    long_name = Path("a-very-long-folder-name/" * 4 + "rollout.jsonl")

    progress.update(done=1, items=10, current=long_name)
    progress.update(done=2, items=20, current=long_name)  # at once: not drawn again

    assert len(progress.text()) == 39 and progress.text().endswith("...")
    assert stream.getvalue().count("\r") == 1
