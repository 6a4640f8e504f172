"""Reading a JSON Lines recording that its agent may still be writing.

Shared by the importers of formats that append one JSON object a line (Codex CLI
rollouts, Gemini CLI's `.jsonl` sessions). A line is split off at `\\n`; a `\\r` before it
(a file written on Windows) is JSON whitespace and needs no special case. Blank lines are
passed over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.recording import RecordingError, load_json


def read_json_lines(path: Path, data: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The objects of *data*, one a line, each with its 1-based line number.

    A last line without its newline that does not parse is a line the recorder is still
    writing: it is left out, to be read once it is complete. Any other line that is not
    a JSON object raises RecordingError naming `path:line`.
    """
    lines = data.split(b"\n")
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = load_json(raw)
        except (ValueError, RecursionError) as error:
            if number == len(lines):  # no newline after it: still being written
                break
            raise RecordingError(path, number, f"not JSON: {error}") from None
        if not isinstance(value, dict):
            raise RecordingError(path, number, "each line must be a JSON object")
        entries.append((number, value))
    return entries
