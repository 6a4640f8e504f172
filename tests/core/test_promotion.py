"""Promotion (docs/promotion.md): outputs over 800 UTF-8 bytes are Stored; JSON arrays and objects
become Structured; a tool may hand over a Stored output itself and it is summarized alike."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Inline, Stored, Structured, Text
from core.promotion import Admitted, admit, admit_sync, promote
from core.store import FsBlobStore
from core.store.errors import BlobStoreError
from core.summary import summarize


def test_the_policy_defaults_are_the_specs() -> None:
    assert DEFAULT_POLICY.inline_limit == 800
    assert DEFAULT_POLICY.summary_limit == 400
    assert DEFAULT_POLICY.head_lines == 5
    assert DEFAULT_POLICY.tail_lines == 3
    assert DEFAULT_POLICY.json_head_entries == 2


def test_it_keeps_800_bytes_inline_unchanged() -> None:
    output = "x" * 799 + "\n"
    assert promote(output) == Inline(output)


def test_it_stores_801_bytes() -> None:
    output = "x" * 801
    assert promote(output) == Stored(Text(output))


def test_an_empty_output_is_inline() -> None:
    assert promote("") == Inline("")


@pytest.mark.parametrize(
    ("output", "inline"),
    [
        ("é" * 400, True),  # 800 bytes in 400 characters
        ("é" * 401, False),  # 802 bytes
        ("x" * 799 + "é", False),  # 800 characters, 801 bytes
        ("\U0001f600" * 200, True),  # 4-byte characters: 800 bytes
        ("\U0001f600" * 201, False),
        ("€" * 266 + "xx", True),  # 3-byte characters: 798 + 2 bytes
        ("€" * 267, False),
    ],
)
def test_it_counts_utf8_bytes_not_characters(output: str, inline: bool) -> None:
    assert isinstance(promote(output), Inline if inline else Stored)


def test_it_recognizes_a_json_array() -> None:
    value = [{"id": n, "name": "x" * 20} for n in range(40)]
    assert promote(json.dumps(value)) == Stored(Structured(value))


def test_it_recognizes_a_json_object() -> None:
    value = {f"key{n}": "v" * 20 for n in range(40)}
    assert promote(json.dumps(value, indent=2)) == Stored(Structured(value))


def test_it_ignores_whitespace_around_json() -> None:
    value = list(range(300))
    output = " \t\r\n " + json.dumps(value) + "\n\n  "
    assert promote(output) == Stored(Structured(value))


def test_a_json_scalar_stays_text() -> None:
    for output in (json.dumps("x" * 900), "1" * 900, "true" + " " * 900, "null" + "\n" * 900):
        assert promote(output) == Stored(Text(output))


def test_invalid_json_stays_text_unchanged() -> None:
    for output in ("[" + "1," * 500, "{" + "x" * 900, "[1, 2] trailing" + "." * 900):
        assert promote(output) == Stored(Text(output))


def test_json_after_other_text_stays_text() -> None:
    output = "result: " + json.dumps(list(range(300)))
    assert promote(output) == Stored(Text(output))


def test_it_keeps_integers_beyond_64_bits_exact() -> None:
    value = [2**70 + n for n in range(40)]
    assert promote(json.dumps(value)) == Stored(Structured(value))


def test_lone_surrogates_never_raise() -> None:
    assert promote("\ud800" * 266) == Inline("\ud800" * 266)  # 798 bytes
    assert promote("\udfff" * 300) == Stored(Text("\udfff" * 300))
    escaped = json.dumps(["\ud800"] * 200)  # the escape \ud800 in valid JSON
    assert promote(escaped) == Stored(Structured(["\ud800"] * 200))
    raw = '["' + "\ud800" * 300 + '"]'  # a raw lone surrogate inside JSON text
    assert isinstance(promote(raw), Stored)


@given(st.text(max_size=1200))
def test_promotion_never_raises_and_keeps_the_output(output: str) -> None:
    promoted = promote(output)
    if isinstance(promoted, Inline):
        assert promoted.text == output
        assert len(output.encode("utf-8", "surrogatepass")) <= 800
    else:
        assert len(output.encode("utf-8", "surrogatepass")) > 800
        if isinstance(promoted.content, Text):
            assert promoted.content.text == output


def test_a_policy_sets_the_inline_limit() -> None:
    policy = Policy(inline_limit=10)
    assert promote("x" * 10, policy) == Inline("x" * 10)
    assert promote("x" * 11, policy) == Stored(Text("x" * 11))


def test_admit_passes_inline_output_through_without_storing(store: FsBlobStore) -> None:
    assert admit_sync(Inline("small"), store) == Admitted("small", None)
    assert asyncio.run(admit(Inline("small"), store)) == Admitted("small", None)
    assert not store.root.exists() or not any(store.root.iterdir())


def test_admit_stores_and_summarizes_a_promoted_output(store: FsBlobStore) -> None:
    output = "\n".join(f"line {n}" for n in range(200))
    admitted = admit_sync(promote(output), store)
    assert admitted.blob_id is not None
    assert store.load_sync(admitted.blob_id) == Text(output)
    assert admitted.text == summarize(admitted.blob_id, Text(output))
    assert admitted.text.startswith(f"[blob:{admitted.blob_id}] text | 200 lines\n")


@pytest.mark.parametrize(
    "content",
    [Text("tiny"), Text("a\n" * 1000), Structured([1, 2]), Structured({"k": "v"})],
)
def test_a_tool_provided_stored_output_is_summarized_the_same_way(
    store: FsBlobStore, content: Text | Structured
) -> None:
    admitted = asyncio.run(admit(Stored(content), store))
    assert admitted.blob_id is not None
    assert admitted.text == summarize(admitted.blob_id, content)
    assert store.load_sync(admitted.blob_id) == content
    sync = admit_sync(Stored(content), store)
    assert sync.text == summarize(sync.blob_id, content)


def test_admit_uses_the_policy_for_the_summary(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    policy = Policy(head_lines=1, tail_lines=1)
    admitted = admit_sync(Stored(Text("a\nb\nc")), store, policy)
    assert admitted.text.split("\n")[1:] == ["── head ──", "a", "── tail ──", "c"]


@pytest.mark.parametrize("depth", [300, 1000, 1023, 1100, 100_000])
def test_deeply_nested_json_is_admitted_without_raising(store: FsBlobStore, depth: int) -> None:
    # orjson reads up to 1024 levels but writes only 254; the stdlib runs out near 1000.
    output = "[" * depth + "]" * depth + " " * 800
    admitted = admit_sync(promote(output), store)
    assert admitted.blob_id is not None
    stored = store.load_sync(admitted.blob_id)
    assert stored == Text(output) or isinstance(stored, Structured)


def test_a_tool_value_too_deep_to_write_is_a_store_error(store: FsBlobStore) -> None:
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(BlobStoreError, match="cannot store this value as JSON"):
        admit_sync(Stored(Structured(value)), store)
