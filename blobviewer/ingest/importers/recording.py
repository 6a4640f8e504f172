"""What every importer produces, and the helpers they share.

Each item record an importer emits carries a `source_digest`: a SHA-256 over the canonical
JSON of the source record it came from (a JSON Lines line, or one message or step of a
whole-document recording), plus which of that record's items it is. Ingest keys items by
it, so a later importer that derives different items from the same recording still
recognises the items it already recorded (see blobviewer.ingest.rows). Set the source with
:meth:`RecordBuilder.from_source` before adding the items a record yields.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from core.json_values import every_float
from core.tool_text import unwrap_text

# Session ids of imported recordings are derived from their content, so importing the
# same file again (from any path, or after it grew) finds the same session.
IMPORT_NAMESPACE = uuid.UUID("5b0e3c52-4f3a-4a8e-9d0b-6f1c2a7e9b10")


class RecordingError(ValueError):
    """A recording is unknown or damaged; names the file and, where there is one, the line."""

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {message}")


class UnknownFormat(RecordingError):
    """The file is not a recording of any format blobviewer reads."""


@dataclass
class Recording:
    format: str
    header: dict[str, Any]  # id, created_at, title, model, meta, status
    records: list[dict[str, Any]] = field(default_factory=list)
    # What a read of the file once it has grown needs to go on from where this read
    # ended (see Carried), or None: a read that cannot be resumed.
    carry: dict[str, Any] | None = None
    # A read that resumed: *records* are only what the new lines add, and *earlier* the
    # items already recorded that they change (each a Carried.item: its source_digest
    # and the fields a later line sets). None for a read of the whole file.
    earlier: list[dict[str, Any]] | None = None
    # One of several sessions a file holds (a sub-agent's): what ingest calls it.
    label: str = ""


# orjson reads an integer past 64 bits (below -2**63, or from 2**64) as a float, without
# a word: such a float, or any float that big, sends the text to json, which reads it
# exactly.
_LOST_INTEGER = 2.0**63


def load_json(raw: bytes) -> Any:
    """`json.loads(raw)`: the same value, or the same error, about three times faster.

    orjson reads most recordings' JSON exactly as json does (floats too); what it reads
    otherwise (an integer past 64 bits, found by walking the value: quicker than looking
    for long runs of digits in the text, which hashes and ids in strings have too) or
    refuses (NaN, a lone surrogate, a byte order mark, UTF-16) goes to json, so values
    and error messages stay json's own."""
    return load_json_record(raw)[0]


def load_json_record(raw: bytes) -> tuple[Any, bool]:
    """load_json's value, and whether every float in it is plain: one that orjson reads
    and writes as json does (0, or from 1e-4 up to 2**63), so that canonical_digest need
    not walk the value for its floats again (one walk where there were two)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw), False
    if every_float(value, _plain):
        return value, True
    return (value if _no_lost_integer(value) else json.loads(raw)), False


def _plain(number: float) -> bool:
    return number == 0.0 or 1e-4 <= abs(number) < _LOST_INTEGER


def _no_lost_integer(value: Any) -> bool:
    """Whether no float in *value* is as big as an integer orjson would have lost."""
    return every_float(value, _not_lost)


def _not_lost(number: float) -> bool:
    return -_LOST_INTEGER < number < _LOST_INTEGER


def canonical_digest(value: Any, *, plain_floats: bool = False) -> str:
    """SHA-256 (hex) of *value* (a JSON value) as canonical JSON: sorted keys, no spaces,
    UTF-8 (lone surrogates kept), so the same record digests the same whatever its key
    order. The canonical text is `json.dumps`'s (see _json_canonical); orjson writes the
    same bytes for most records many times faster, and is used where it does.
    *plain_floats*: load_json_record found every float in *value* plain. A value with a
    string longer than LONG_TEXT is hashed a piece at a time (_digest_in_pieces)."""
    if _holds_long_text(value):
        return _digest_in_pieces(value, plain_floats=plain_floats)
    canonical = _orjson_canonical(value, plain_floats=plain_floats)
    if canonical is None:
        canonical = _json_canonical(value)
    return hashlib.sha256(canonical).hexdigest()


# A string longer than this (characters) is hashed a piece at a time: the canonical JSON of
# a record holding a tool output of a gigabyte would take another gigabyte.
LONG_TEXT = 1 << 20
# A lone surrogate, which orjson refuses to write (the record is then written by json).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_long_text(value: Any) -> bool:
    kind = type(value)
    if kind is str:
        return len(value) > LONG_TEXT
    if kind is dict:
        items: Iterable[Any] = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return False
    for item in items:
        kind = type(item)
        if kind is str:
            if len(item) > LONG_TEXT:
                return True
        elif (kind is dict or kind is list or kind is tuple) and _holds_long_text(item):
            return True
    return False


def _digest_in_pieces(value: Any, *, plain_floats: bool) -> str:
    """canonical_digest of *value*, its long strings written and hashed a piece at a time:
    the rest is written with a marker in place of each, as canonical_digest writes it,
    and the hash takes that text up to each marker, then the string. A string's JSON is
    the same piece by piece (each character is written alone), and the same from orjson
    and json, but for lone surrogates, which send the whole record to json."""
    token = uuid.uuid4().hex  # a marker no record holds by chance
    texts: list[str] = []

    def swapped(item: Any) -> Any:
        kind = type(item)
        if kind is str and len(item) > LONG_TEXT:
            texts.append(item)
            return f"\x00{token}:{len(texts) - 1}"
        if kind is dict:
            return {key: swapped(inner) for key, inner in item.items()}
        if kind is list or kind is tuple:
            return [swapped(inner) for inner in item]
        return item

    rest = swapped(value)
    by_json = any(_SURROGATE.search(text) for text in texts)
    canonical = None if by_json else _orjson_canonical(rest, plain_floats=plain_floats)
    if canonical is None:
        canonical, by_json = _json_canonical(rest), True
    markers = [_json_canonical(f"\x00{token}:{index}") for index in range(len(texts))]
    places = sorted((canonical.find(marker), index) for index, marker in enumerate(markers))
    digest = hashlib.sha256()
    written = memoryview(canonical)
    at = 0
    for place, index in places:
        digest.update(written[at:place])
        digest.update(b'"')
        text = texts[index]
        for start in range(0, len(text), LONG_TEXT):
            piece = text[start : start + LONG_TEXT]
            digest.update(_json_canonical(piece)[1:-1] if by_json else orjson.dumps(piece)[1:-1])
        digest.update(b'"')
        at = place + len(markers[index])
    digest.update(written[at:])
    return digest.hexdigest()


def _json_canonical(value: Any) -> bytes:
    canonical = json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return canonical.encode("utf-8", "surrogatepass")


# Types orjson would write otherwise than json's default=str: refused, so json writes them.
_ORJSON_CANONICAL = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _orjson_canonical(value: Any, *, plain_floats: bool = False) -> bytes | None:
    """orjson's canonical JSON of *value* when it is _json_canonical's byte for byte, else
    None. They differ only on floats: below 1e-4 orjson writes them otherwise (0.00001 for
    1e-05, 1e-7 for 1e-07), and NaN and the infinities as null; what else json writes
    differently (integers past 64 bits, lone surrogates, other types) orjson refuses.
    Walking the value for its floats costs what orjson's writing does; looking for such
    floats in the text instead cost three times that, and text that looked like one
    (a UUID's `8e-4`) sent a record in twenty to json, ten times slower."""
    try:
        canonical = orjson.dumps(value, option=_ORJSON_CANONICAL)
    except TypeError:
        return None
    return canonical if plain_floats or _floats_written_alike(value) else None


def _floats_written_alike(value: Any) -> bool:
    """Whether every float in *value* is one that orjson writes as json does: 0, or from
    1e-4 up (not NaN, not infinite)."""
    return every_float(value, _written_alike)


def _written_alike(number: float) -> bool:
    return number == 0.0 or 1e-4 <= abs(number) < math.inf


# The fields of an item that a later line of its recording may still set: its tokens and
# cost (the rest of an API message's lines), its failure (a command's exit, reported later).
_LATER_FIELDS = (
    "input_tokens",
    "output_tokens",
    "context_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
    "is_error",
)


class Carried(dict[str, Any]):
    """What a read of a JSON Lines recording carries over to the read that resumes it once
    the file has grown (Recording.carry; kept in the file's IngestedFile row): the
    importer's state after the last whole line, as JSON. Items it refers to (a message
    whose tokens later lines set, a result a later exit marks failed) are kept as `item`s;
    `earlier` gives back those that the resumed read changed."""

    def __init__(self, carry: dict[str, Any] | None = None) -> None:
        super().__init__(carry or {})
        self._items: list[tuple[dict[str, Any], dict[str, Any]]] = []

    @staticmethod
    def item(record: dict[str, Any]) -> dict[str, Any]:
        """What a carry keeps of an item record: its source_digest and type, and the
        fields a later line may set."""
        kept = ("type", "source_digest", *_LATER_FIELDS)
        return {key: record[key] for key in kept if key in record}

    def restored(self, item: dict[str, Any]) -> dict[str, Any]:
        """A carried *item*, as a record the importer may change like any other."""
        record = dict(item)
        self._items.append((record, item))
        return record

    def earlier(self) -> list[dict[str, Any]]:
        """The restored items the resumed read changed."""
        return [record for record, item in self._items if record != item]


class RecordBuilder:
    """Numbers items from 1, remembers tool names by call id (for the results), and gives
    each item the `source_digest` of the source record set by :meth:`from_source`."""

    def __init__(self, carried: Carried | None = None) -> None:
        self.records: list[dict[str, Any]] = []
        # The items a read that resumed numbers after, and the calls it knows of that
        # have no result yet.
        carried = carried if carried is not None else Carried()
        self._before: int = carried.get("items", 0)
        self.tool_names: dict[str, str] = dict(carried.get("calls", {}))
        self._answered: set[str] = set()
        self._source: str | None = None
        self._keys: Counter[str] = Counter()

    def carry(self) -> dict[str, Any]:
        """What a read that resumes after this one needs of the builder."""
        pending = {k: v for k, v in self.tool_names.items() if k not in self._answered}
        return {"items": self._before + len(self.records), "calls": pending}

    def from_source(self, record: Any, *, plain_floats: bool = False) -> None:
        """The items added from now on come from *record* (the source's own JSON value;
        *plain_floats* as load_json_record found them)."""
        self._source = canonical_digest(record, plain_floats=plain_floats)

    def _add(self, record: dict[str, Any], at: str | None, extra: dict[str, Any]) -> None:
        seq = self._before + len(self.records) + 1
        record = {"type": record.pop("type"), "seq": seq, "at": at, **record}
        record.update({key: value for key, value in extra.items() if value is not None})
        if self._source is not None:
            record["source_digest"] = self._item_digest(record)
        self.records.append(record)

    def _item_digest(self, record: dict[str, Any]) -> str:
        # One source record may yield several items (a Claude Code line with two results
        # and a text). A result is told apart by its call id, anything else by its type;
        # a repeat of the same key (a duplicated line) by how many came before it. Never
        # by position, so an importer that adds or drops an item from a record keeps the
        # keys of the others.
        if record["type"] == "tool_result":
            part = f"tool_result:{record.get('call_id', '')}"
        else:
            part = str(record["type"])
        key = f"{self._source}:{part}"
        self._keys[key] += 1
        if self._keys[key] > 1:
            key = f"{key}#{self._keys[key] - 1}"
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    def user(self, text: str, *, at: str | None = None, **extra: Any) -> None:
        self._add({"type": "user", "text": text}, at, extra)

    def assistant(
        self, text: str, tool_calls: list[dict[str, Any]], *, at: str | None = None, **extra: Any
    ) -> None:
        for call in tool_calls:
            self.tool_names[call["id"]] = call["name"]
        self._add({"type": "assistant", "text": text, "tool_calls": tool_calls}, at, extra)

    def tool_result(
        self,
        call_id: str,
        output: Any,
        *,
        tool: str | None = None,
        is_error: bool = False,
        at: str | None = None,
        **extra: Any,
    ) -> None:
        """A tool's result. *output*: its text, or the recording's content (a list of
        parts): text in a wrapper is that text (core.tool_text, with a note of the blocks
        left out), any other content reads as text_of reads it."""
        name = tool or self.tool_names.get(call_id, "")
        self._answered.add(call_id)
        output, left_out = step_output_text(output)
        if left_out:
            extra["note"] = "; ".join(filter(None, [extra.get("note"), left_out]))
        record = {
            "type": "tool_result",
            "call_id": call_id,
            "tool": name,
            "output": output,
            "is_error": is_error,
        }
        self._add(record, at, extra)


def step_output_text(output: Any) -> tuple[str, str]:
    """A tool output as a step's text, and a note of the blocks it left out ("" if none):
    text in a wrapper is the text it holds (core.tool_text); other content is text_of's."""
    unwrapped = unwrap_text(output)
    if unwrapped is not None:
        return unwrapped.text, unwrapped.note
    return (output if isinstance(output, str) else text_of(output)), ""


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or a list of parts (text, image, ...)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        pieces = []
        for part in content:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])
            elif isinstance(part, dict) and part.get("type") in ("image", "image_url"):
                pieces.append("[image]")
            else:
                pieces.append(json.dumps(part, ensure_ascii=False))
        return "\n".join(pieces)
    return json.dumps(content, ensure_ascii=False)


def parse_call_arguments(arguments: Any) -> Any:
    """Tool call arguments as a JSON value; a string that is not JSON is kept as it is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return {} if arguments is None else arguments


def iso_time(value: Any) -> str | None:
    """An ISO 8601 time with timezone from an ISO string or a Unix timestamp, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, tz=UTC).isoformat(timespec="milliseconds")
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.isoformat()
    return None


def stable_session_id(kind: str, opening: Any) -> str:
    """A session id from the start of a recording (e.g. its first three messages).

    Whole-document recordings are rewritten as they grow, so a hash of the whole file
    would make a grown recording a new session; its opening stays the same.
    """
    canonical = json.dumps(opening, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    return str(uuid.uuid5(IMPORT_NAMESPACE, f"{kind}:{digest}"))


def session_uuid(kind: str, raw_id: str) -> str:
    """The recording's own session id when it is a UUID (Codex's and Gemini CLI's are),
    else a UUID derived from it, so the same recording always finds the same session."""
    try:
        return str(uuid.UUID(raw_id))
    except ValueError:
        return str(uuid.uuid5(IMPORT_NAMESPACE, f"{kind}:{raw_id}"))


def first_line(text: str, limit: int = 120) -> str:
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def header(
    session_id: str,
    *,
    title: str,
    model: str = "",
    created_at: str | None,
    path: Path,
    format: str,
    meta: dict[str, Any] | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """A session header. *created_at* is a time the recording itself holds, or None: never
    the file's modification time, which says when it was copied, not when it ran (ingest
    then uses the ingest time for sorting, and the session has no start or end).
    *status* is how the run ended where the recording says (e.g. `submitted`)."""
    return {
        "id": session_id,
        "created_at": created_at,
        "title": title,
        "model": model,
        "meta": {"format": format, "source_name": path.name, **(meta or {})},
        "status": status if isinstance(status, str) else "",
    }


def str_or_empty(value: Any) -> str:
    """*value* when it is a string, else "" (a field left out, or holding something else)."""
    return value if isinstance(value, str) else ""


def dict_field(container: Mapping[str, Any], key: str) -> dict[str, Any]:
    """*container*[*key*] when it is a JSON object, else {}."""
    value = container.get(key)
    return value if isinstance(value, dict) else {}


def list_field(container: Mapping[str, Any], key: str) -> list[Any]:
    """*container*[*key*] when it is a JSON array, else []."""
    value = container.get(key)
    return value if isinstance(value, list) else []


def finite_number(value: Any) -> float | None:
    """*value* as a float when it is a JSON number a float holds (not a bool, NaN, an
    infinity, or an integer too big for a float), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def token_count(value: Any) -> int | None:
    """A token count as recorded: a non-negative integer, else None (not recorded)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
