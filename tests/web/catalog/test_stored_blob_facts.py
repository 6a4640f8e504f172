"""Ingest makes a new blob's row from the content it has just stored (stored_blob_facts)
instead of reading the blob back (read_blob_facts): the two give the same facts, for
texts, arrays and objects, promoted from tool outputs as ingest promotes them."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobviewer.catalog.blobs import catalog_blobs, read_blob_facts, stored_blob_facts
from blobviewer.catalog.provenance import PREVIEW_CHARS, one_line_text, preview_of
from blobviewer.models import Blob
from core.content import Content, Stored, Structured, Text
from core.json_values import dumps_for_storage
from core.promotion import promote
from core.store import FsBlobStore
from tests.core.strategies import json_values

FACTS = ("id", "kind", "size", "count", "created_at", "missing", "error", "preview")

# Lines with what a line model must get right: \r\n, blank and blank-looking lines,
# control characters, terminal codes, multi-byte characters and lone surrogates, and
# lines long enough that the preview's 8 KiB read ends inside a character.
line_text = st.lists(
    st.sampled_from(
        [
            "a",
            " ",
            "\t",
            "\r",
            "\x00",
            "\x01",
            "\x85",
            "\x1b[31m",
            "\x1b]0;",
            "\x07",
            "é",
            "€",
            "😀",
            "\ud800",
            "{",
            "[",
        ]
    ),
    max_size=40,
).map("".join)
texts = st.one_of(
    # A long first line: its preview is cleaned from its start (controls and blanks
    # dropped, tabs made spaces, terminal codes stripped).
    st.tuples(line_text, st.integers(0, 400), line_text).map(
        lambda parts: parts[0] * parts[1] + "\n" + parts[2]
    ),
    # ... and one whose start cleans to little or nothing.
    st.tuples(
        st.sampled_from(["\x00", "\x01", " ", "\t", "\x1b[1m"]), st.integers(0, 1500)
    ).flatmap(lambda filler: line_text.map(lambda line: filler[0] * filler[1] + line * 60)),
    st.lists(line_text, max_size=30).map("\n".join),
    st.lists(line_text, max_size=30).map(lambda lines: "\r\n".join(lines) + "\r\n"),
    st.tuples(st.integers(0, 12_000), st.sampled_from(["é", "€", "😀", "a"])).map(
        lambda pair: "\n" * (pair[0] % 3) + pair[1] * pair[0]
    ),
)
containers = st.one_of(
    st.lists(json_values, max_size=8),
    st.dictionaries(st.text(max_size=10), json_values, max_size=8),
)


def facts(row: Blob) -> dict[str, Any]:
    return {name: getattr(row, name) for name in FACTS}


def same_facts_as_read(store: FsBlobStore, content: Content) -> Blob:
    blob_id = store.store_sync(content)
    made = stored_blob_facts(blob_id, content, store=store)
    assert made is not None
    assert facts(made) == facts(read_blob_facts(blob_id, store=store, render=True))
    return made


@pytest.fixture(scope="module")
def store() -> Any:
    with tempfile.TemporaryDirectory(prefix="stored-facts-") as folder:
        yield FsBlobStore(Path(folder))


@settings(max_examples=150, deadline=None)
@given(text=texts)
def test_a_text_has_the_facts_read_back(store: FsBlobStore, text: str) -> None:
    same_facts_as_read(store, Text(text))


@settings(max_examples=150, deadline=None)
@given(value=containers)
def test_an_array_or_object_has_the_facts_read_back(store: FsBlobStore, value: Any) -> None:
    same_facts_as_read(store, Structured(value))


@settings(max_examples=100, deadline=None)
@given(value=containers, padding=st.integers(0, 5), text=texts)
def test_a_promoted_tool_output_has_the_facts_read_back(
    store: FsBlobStore, value: Any, padding: int, text: str
) -> None:
    # Outputs over the inline limit, as ingest promotes them: JSON (with surrounding
    # whitespace) becomes an array or object, anything else a text.
    kinds = []
    for output in (" " * padding + dumps_for_storage(value).decode() + "\n" * 2000, text):
        promoted = promote(output + " " * 5000)
        assert isinstance(promoted, Stored)
        kinds.append(same_facts_as_read(store, promoted.content).kind)
    assert kinds[0] == ("json_array" if isinstance(value, list) else "json_object")


def test_the_counts_are_lines_entries_and_keys(store: FsBlobStore) -> None:
    assert same_facts_as_read(store, Text("a\r\nb\n\nc")).count == 4
    assert same_facts_as_read(store, Text("a\n")).count == 1
    assert same_facts_as_read(store, Structured([1, [2, 3], {}])).count == 3
    row = same_facts_as_read(store, Structured({"a": 1, "b": [2]}))
    assert (row.kind, row.count, row.preview) == ("json_object", 2, '{"a":1,"b":[2]}')


def test_a_big_blob_is_read_from_the_store(store: FsBlobStore) -> None:
    # Its index file and rendering are the store's and the reading's: nothing made here.
    big = Text("line\n" * (store.index_min_bytes // 5 + 1))
    assert stored_blob_facts(store.store_sync(big), big, store=store) is None


@pytest.mark.django_db
def test_index_blobs_takes_stored_rows_without_reading_them(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    content = Text("one\ntwo\n")
    blob_id = store.store_sync(content)
    row = stored_blob_facts(blob_id, content, store=store)
    assert row is not None
    monkeypatch.setattr(FsBlobStore, "open_sync", lambda *_: pytest.fail("read the blob"))
    found = catalog_blobs([blob_id], store=store, stored={blob_id: row})
    assert found.rows == {blob_id: row}
    assert found.new == [row]
    found.save()
    assert facts(Blob.objects.get(id=blob_id)) == facts(row)


def first_line_shown(head: bytes, kind: str) -> str:
    """The preview as the spec says it: the first line with something to show, cleaned
    whole, then cut (preview_of cleans only the start of a long line)."""
    text = head.decode("utf-8", errors="replace")
    for line in [text.replace("\n", " ")] if kind == "json" else text.split("\n"):
        shown = one_line_text(line)
        if shown:
            return shown if len(shown) <= PREVIEW_CHARS else shown[: PREVIEW_CHARS - 1] + "…"
    return ""


@settings(max_examples=300, deadline=None)
@given(text=texts, kind=st.sampled_from(["text", "json"]))
def test_a_preview_is_the_first_line_cleaned_whole_and_cut(text: str, kind: str) -> None:
    head = text.encode("utf-8", "surrogatepass")[:8192]
    assert preview_of(head, kind) == first_line_shown(head, kind)
