"""Importers read JSON with load_json (orjson where it reads what json reads): the same
values, types and errors as `json.loads`, so a faster reader changes no item, no digest
and no message."""

from __future__ import annotations

import enum
import hashlib
import json
import math
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobviewer.ingest.importers import claude_code
from blobviewer.ingest.importers.recording import canonical_digest, load_json, load_json_record
from importers.recordings import CLAUDE_CODE, FIXTURES


def same(a: object, b: object) -> bool:
    """Equal values of the same types all the way down (1 and 1.0 differ; NaN is NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def outcome(read, raw: bytes) -> tuple[str, object]:
    try:
        return "value", read(raw)
    except (ValueError, RecursionError) as error:
        return type(error).__name__, str(error)


def assert_reads_as_json(raw: bytes) -> None:
    ours, theirs = outcome(load_json, raw), outcome(json.loads, raw)
    assert ours[0] == theirs[0], (raw[:200], ours, theirs)
    if ours[0] == "value":
        assert same(ours[1], theirs[1]), raw[:200]
    else:
        assert ours == theirs  # json's own message, e.g. in `path:line: not JSON: ...`


@pytest.mark.parametrize(
    "raw",
    [
        b'{"n": 123456789012345678901234567890}',  # past 64 bits: orjson would make a float
        b'{"n": -9223372036854775809, "m": 18446744073709551616}',
        b'{"n": 18446744073709551615, "p": "0000000000000000000000"}',
        b'{"a": [{"b": [1, 2, {"c": -9223372036854775809}]}], "d": 9.3e18, "e": -1e19}',
        b'{"hash": "abc1234567890123456789012345", "n": 9223372036854775807}',
        b'{"x": NaN, "y": Infinity, "z": -Infinity}',
        b'{"big": 1e400}',
        b'{"s": "\\ud800 lone"}',
        b'\xef\xbb\xbf{"bom": 1}',
        '{"utf16": 1}'.encode("utf-16"),
        b'{"a": 1, "a": 2}',
        b'{"f": [0.1, 1e-05, 5e-324, 1.7976931348623157e308, -0.0, 1E5, 2.5e+17]}',
        b"[1,]",
        b'{"torn": "half',
        b"\xff",
        b"[" * 2000 + b"]" * 2000,
        b"  \n",
        b"",
    ],
)
def test_it_reads_every_edge_as_json_does(raw):
    assert_reads_as_json(raw)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(min_value=-1e-3, max_value=1e-3)  # where orjson writes floats otherwise
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans())
def test_it_reads_any_json_text_as_json_does(value, ascii_only):
    assert_reads_as_json(
        json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    )


def test_a_real_recording_reads_to_the_same_items_and_digests_as_with_json(monkeypatch):
    data = CLAUDE_CODE.read_bytes()
    ours = claude_code.load(CLAUDE_CODE, data)
    monkeypatch.setattr(claude_code, "load_json_record", lambda raw: (json.loads(raw), False))
    theirs = claude_code.load(CLAUDE_CODE, data)

    assert ours.records == theirs.records
    assert ours.header == theirs.header
    assert len(ours.records) > 100


def test_every_line_of_the_real_recordings_reads_as_json_does():
    paths = [p for p in sorted(Path(FIXTURES).rglob("*.json*")) if p.is_file()]
    lines = [line for p in paths for line in p.read_bytes().split(b"\n") if line.strip()]
    for line in lines:
        assert_reads_as_json(line)
    assert len(lines) > 1000


def test_a_digest_of_what_it_read_is_the_digest_of_what_json_read():
    raw = b'{"b": [1.5, 1e-07, 123456789012345678901234567890], "a": "\xc3\xa9"}'
    assert canonical_digest(load_json(raw)) == canonical_digest(json.loads(raw))


def json_digest(value: object) -> str:
    """The canonical digest as json alone writes it (the definition canonical_digest
    keeps: digests recorded before must still match)."""
    canonical = json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


looks_like_a_number = st.sampled_from(["1e-7", "2e-05", "0.00001", "x3e-1y", "e-5", "null"])
digest_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and the infinities too: orjson writes them as null
    | st.floats(min_value=-1e-3, max_value=1e-3)  # where orjson's floats differ from json's
    | st.text()  # lone surrogates too
    | looks_like_a_number,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=8) | looks_like_a_number, children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=1000, deadline=None)
@given(digest_values)
def test_a_digest_is_the_one_json_writes_whatever_the_value(value):
    assert canonical_digest(value) == json_digest(value)


class Colour(enum.Enum):
    RED = 1


class FloatKind(float):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"f": 1e-05},
        {"f": -3.96253090586e-05, "g": 1e-09},
        {"n": float("nan"), "m": None},
        [float("inf"), float("-inf")],
        {"big": 2**64},
        {"s": "\ud800"},
        {"when": datetime(2025, 1, 2, 3, 4, 5)},
        {"s": "1e-7 and 0.00001 in a text"},
        {"t": (1e-05, 2)},  # a tuple, which json and orjson both write as a list
        {"e": Colour.RED},  # json writes str(), orjson the value
        {"f": FloatKind(1e-05)},
    ],
)
def test_a_digest_is_json_s_where_orjson_writes_otherwise(value):
    assert canonical_digest(value) == json_digest(value)


def test_every_record_of_the_real_recordings_digests_as_with_json():
    paths = [p for p in sorted(Path(FIXTURES).rglob("*.json*")) if p.is_file()]
    read = [outcome(load_json, line) for p in paths for line in p.read_bytes().split(b"\n")]
    values = [value for kind, value in read if kind == "value"]
    assert len(values) > 1000
    for value in values:
        assert canonical_digest(value) == json_digest(value)


@settings(max_examples=1000, deadline=None)
@given(json_values, st.booleans())
def test_a_line_read_with_its_floats_walked_once_digests_as_with_json(value, ascii_only):
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    read, plain_floats = load_json_record(raw)
    assert same(read, json.loads(raw))
    assert canonical_digest(read, plain_floats=plain_floats) == json_digest(json.loads(raw))


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        (b'{"a": [1, "x", null, true, {"b": 0.5}], "c": 0.0}', True),
        (b'{"a": 1e-05}', False),  # orjson writes it 0.00001
        (b'{"a": 12345678901234567890123}', False),  # past 64 bits: read by json
        (b'{"a": 9.3e18}', False),  # as big as an integer orjson would have lost
        (b'{"a": NaN}', False),  # orjson refuses it: read by json
    ],
)
def test_a_line_s_floats_are_plain_only_when_orjson_writes_them_as_json_does(raw, plain):
    read, plain_floats = load_json_record(raw)
    assert plain_floats is plain
    assert same(read, json.loads(raw))
