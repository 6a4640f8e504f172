"""Session logs: one JSON Lines file per session, appended and flushed item by item.

Line 1 is `{"type": "session", "id", "created_at", "title", "model", "meta"}`; every
further line is one history item with `type`, `seq` and `at` (docs/session-log.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import orjson

from core.agent.history import ITEM_TYPES, Item, RecordError, item_from_record, item_to_record
from core.json_values import JsonError, parse_json
from core.redaction import redact_item
from core.store.blob_id import new_blob_id, parse_blob_id
from core.store.errors import InvalidBlobId

MAX_SEQ = 2**31 - 1  # what every database's integer column holds


class SessionLogError(ValueError):
    """A session log is damaged; *line* is 1-based (0 when the file cannot be read at all)."""

    def __init__(self, path: str | os.PathLike[str], line: int, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _dumps(record: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(record) + b"\n"
    except TypeError:  # lone surrogates or huge ints: the stdlib writes them escaped
        import json

        return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode()


class SessionLogWriter:
    """Appends a session's items to `<dir>/<session_id>.jsonl`, flushing each line."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        title: str = "",
        model: str = "",
        meta: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        self.session_id = str(parse_blob_id(session_id) if session_id else new_blob_id())
        self.path = Path(directory) / f"{self.session_id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = 0
        try:  # a new file: appending a second header to a log would damage it
            self._file = open(self.path, "xb")  # noqa: SIM115 (closed by close())
        except FileExistsError:
            raise ValueError(f"a session log already exists: {self.path}") from None
        header = {
            "type": "session",
            "id": self.session_id,
            "created_at": now_iso(),
            "title": title,
            "model": model,
            "meta": meta or {},
        }
        self._write(header)

    def append(self, item: Item) -> dict[str, Any]:
        """Write one item; returns the record as written (with its seq and time)."""
        self._seq += 1
        # Secrets are redacted before the line is written (core.redaction).
        record = {"seq": self._seq, "at": now_iso(), **redact_item(item_to_record(item))}
        record = {"type": record.pop("type"), **record}
        self._write(record)
        return record

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(_dumps(record))
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@dataclass
class SessionLog:
    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    torn_tail: bool = False  # the last line was cut mid-write and was skipped

    @property
    def id(self) -> str:
        return str(self.header["id"])

    def items(self) -> list[Item]:
        return [item_from_record(record) for record in self.records]


def read_session_log(path: str | os.PathLike[str]) -> SessionLog:
    """Read a session log; skips a torn last line, raises SessionLogError for other damage."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SessionLogError(path, 0, f"cannot read: {error.strerror}") from None
    return parse_session_log(data, path)


def parse_session_log(data: bytes, path: str | os.PathLike[str]) -> SessionLog:
    """:func:`read_session_log` for a log already in memory; *path* names it in errors."""
    path = Path(path)
    if not data.strip():
        raise SessionLogError(path, 1, "empty file: expected a session header line")
    lines = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        lines.pop()
    torn = False

    def records() -> Iterator[tuple[int, Any]]:
        nonlocal torn
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                raise SessionLogError(path, number, "empty line")
            try:
                # parse_json, not orjson.loads: lines with lone surrogates, which the
                # writer escapes through the stdlib, must read back too.
                record = parse_json(raw)
            except JsonError as error:
                # A torn last line (a crash mid-write) after the header is dropped.
                if number == len(lines) > 1 and not ends_with_newline:
                    torn = True
                    return
                raise SessionLogError(path, number, f"not JSON: {error}") from None
            yield number, record

    log = session_log_from_records(path, records())
    log.torn_tail = torn
    return log


def session_log_from_records(
    path: str | os.PathLike[str], records: Iterable[tuple[int, Any]]
) -> SessionLog:
    """A session log from its lines' JSON values, each with its 1-based line number (the
    header first), checked as parse_session_log checks them: for a reader that parses
    the lines itself (blobviewer's ingest reads a long line a block at a time)."""
    path = Path(path)
    log: SessionLog | None = None
    for number, record in records:
        if not isinstance(record, dict):
            raise SessionLogError(path, number, "each line must be a JSON object")
        if log is None:
            log = SessionLog(path, _header(path, record))
            continue
        log.records.append(_item(path, number, record))
    if log is None:
        raise SessionLogError(path, 1, "empty file: expected a session header line")
    return log


def _header(path: Path, record: dict[str, Any]) -> dict[str, Any]:
    if record.get("type") != "session":
        raise SessionLogError(path, 1, 'the first line must be {"type": "session", ...}')
    try:
        session_id = str(parse_blob_id(record.get("id", "")))
    except InvalidBlobId as error:
        raise SessionLogError(path, 1, f"session id: {error}") from None
    for key in ("title", "model", "created_at"):
        if not isinstance(record.get(key, ""), str):
            raise SessionLogError(path, 1, f"{key} must be a string")
    if not isinstance(record.get("meta", {}), dict):
        raise SessionLogError(path, 1, "meta must be an object")
    return {
        "id": session_id,
        "created_at": record.get("created_at", ""),
        "title": record.get("title", ""),
        "model": record.get("model", ""),
        "meta": record.get("meta", {}),
    }


def _item(path: Path, number: int, record: dict[str, Any]) -> dict[str, Any]:
    if record.get("type") not in ITEM_TYPES:
        expected = ", ".join(ITEM_TYPES)
        raise SessionLogError(path, number, f"type must be one of {expected}")
    seq = record.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq <= MAX_SEQ:
        raise SessionLogError(path, number, f"seq must be an integer from 1 to {MAX_SEQ}")
    try:
        item_from_record(record)
    except RecordError as error:
        raise SessionLogError(path, number, str(error)) from None
    return record
