"""The index of a JSON blob (core.store.index.json_index): the spans of its entries and keys, one
level down for big values, made alike from the stored value and from the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.content import Structured
from core.json_values import dumps_compact, dumps_for_storage
from core.store import FsBlobStore
from core.store.file_reader import FileReader
from core.store.index import INDEX_FOLDER, JsonIndex, index_path, open_index
from core.store.index import json_index as json_index_module
from core.store.index.index_file import BytesReader
from core.store.index.json_from_file import json_index_from_file
from core.store.index.json_index import Node, json_index_from_value
from tests.core.strategies import json_values


@pytest.fixture
def small_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every top-level container gets a table of its own, however small."""
    monkeypatch.setattr(json_index_module, "CHILD_MIN", 0)


def opened(path: Path, data: bytes) -> JsonIndex:
    return JsonIndex.open(FileReader(path, "json"), BytesReader(data))


def stored(tmp_path: Path, value: Any) -> tuple[FsBlobStore, Path]:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    blob_id = store.store_sync(Structured(value))
    return store, store.path_of(blob_id)


containers = st.one_of(
    st.lists(json_values, max_size=8),
    st.dictionaries(st.text(alphabet=st.characters(codec=None)), json_values, max_size=8),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(containers, st.booleans())
def test_the_index_from_the_value_is_the_index_from_the_file(
    tmp_path_factory: pytest.TempPathFactory, value: Any, children: bool
) -> None:
    """What the store writes when it stores a value and what a reader makes from the file
    for an old blob are the same bytes, flags included."""
    path = tmp_path_factory.mktemp("blob") / "blob.json"
    saved = json_index_module.CHILD_MIN
    json_index_module.CHILD_MIN = 0 if children else saved
    try:
        data = dumps_for_storage(value)
        from_value = json_index_from_value(value, data)
        path.write_bytes(data)
        with FileReader(path, "json") as blob:
            from_file = json_index_from_file(blob)
    finally:
        json_index_module.CHILD_MIN = saved
    assert from_value is not None
    assert from_value == from_file


def test_raw_is_set_when_every_span_is_its_compact_json(tmp_path: Path) -> None:
    for value, raw in (
        ([{"a": "é"}, [1.5, None]], True),
        ([10**30, "x"], False),  # beyond 64 bits: written by the standard library
        ({"k": "\ud800"}, False),  # a lone surrogate, escaped
    ):
        data = dumps_for_storage(value)
        index = json_index_from_value(value, data)
        assert index is not None
        path = tmp_path / "blob.json"
        path.write_bytes(data)
        with opened(path, index) as opened_index:
            assert opened_index.raw is raw


def test_entries_are_found_by_their_number(tmp_path: Path) -> None:
    value = [{"id": n, "name": "é" * (n % 5)} for n in range(1000)]
    store, path = stored(tmp_path, value)
    with open_index(store, path.stem, min_bytes=0) as index:
        root = index.root()
        assert (root.kind, root.count) == ("array", 1000)
        spans = list(index.spans(root.table, 700, 703))
        assert [index.value(node_of(span)) for span in spans] == value[700:703]
        shown = index.compact(*spans[0], limit=1000)
        assert shown.text == dumps_compact(value[700]) and not shown.cut


def node_of(span: tuple[int, int]) -> Node:
    return Node("", 0, *span)


def test_keys_are_found_by_name_with_their_kind_and_size(
    tmp_path: Path, small_children: None
) -> None:
    value = {f"k{n}": n for n in range(500)} | {
        "items": list(range(300)),
        "config": {"name": "x", "deep": {"a": [1, 2]}},
        "log": "one\ntwo",
        "": None,
        'a"b|c': True,
    }
    store, path = stored(tmp_path, value)
    with open_index(store, path.stem, min_bytes=0) as index:
        table = index.root().table
        for name, expected in value.items():
            node = index.find(table, name)
            assert node is not None, name
            assert index.value(node) == expected
        assert index.find(table, "missing") is None
        items = index.find(table, "items")
        assert (items.kind, items.count, items.table.count) == ("array", 300, 300)
        config = index.find(table, "config")
        assert config.shape == "object{2}"
        deep = index.find(config.table, "deep")
        assert deep.table is None  # two levels down: read whole
        assert index.value(deep) == {"a": [1, 2]}
        assert index.find(table, "log").shape == "string(7)"
        names = [name for name, _ in index.key_names(table, 498, 505)]
        assert names == ["k498", "k499", "items", "config", "log", "", 'a"b|c']


def test_keys_whose_hashes_collide_are_told_apart_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_index_module.zlib, "crc32", lambda data: len(data) % 3)
    value = {f"key {n}": n for n in range(2000)}
    store, path = stored(tmp_path, value)
    with open_index(store, path.stem, min_bytes=0) as index:
        table = index.root().table
        for name in ("key 0", "key 999", "key 1999", "key 1500"):
            assert index.value(index.find(table, name)) == value[name]
        assert index.find(table, "key 2000") is None


@pytest.mark.parametrize(
    "text",
    [
        b"[1, 2, 3]",  # not compact: the store never writes this
        b'{"a": 1}',
        b'{"a":1,"a":2}',  # a repeated key: its parsed value has one
        b"[1,2",  # damaged
        b"[1,2]]",
        b"[NaN]",
        b"[1e999]",
        b'["\xff"]',
        b"",
    ],
)
def test_json_it_cannot_index_is_remembered_and_read_whole(
    tmp_path: Path, text: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = stored(tmp_path, [0])
    path.write_bytes(text)
    assert open_index(store, path.stem, min_bytes=0) is None

    def refuse(_: object) -> None:
        raise AssertionError("an index was made again")

    monkeypatch.setattr("core.store.index.json_index_from_file", refuse)
    assert open_index(store, path.stem, min_bytes=0) is None


def test_a_blob_stored_by_hand_gets_its_index_on_first_use(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    blob_id = store.store_sync(Structured({"seed": 1}))
    path = store.path_of(blob_id)
    value = {"items": [{"n": n} for n in range(10_000)], "total": 10_000}
    path.write_bytes(orjson.dumps(value))
    index_path(store.root, str(blob_id)).unlink()
    with open_index(store, path.stem, min_bytes=0) as index:
        items = index.find(index.root().table, "items")
        assert items.table is not None  # over CHILD_MIN: one level down
        (last,) = index.spans(items.table, 9999, 10_000)
        assert index.value(node_of(last)) == {"n": 9999}
    assert index_path(store.root, str(blob_id)).exists()


def test_discarding_a_blob_discards_its_index(tmp_path: Path) -> None:
    store, path = stored(tmp_path, list(range(100)))
    blob_id = path.stem
    assert index_path(store.root, blob_id).exists()
    store.discard_sync(blob_id)
    assert list((store.root / INDEX_FOLDER).iterdir()) == []


def test_put_writes_the_index_of_an_uploaded_blob(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
    blob_id = "0190f5e2-7c1a-7b3e-9c4d-123456789abc"
    assert store.put_sync(blob_id, Structured({"a": [1, 2]}))
    index = index_path(store.root, blob_id).read_bytes()
    assert index == json_index_from_value({"a": [1, 2]}, store.path_of(blob_id).read_bytes())


def test_the_stored_bytes_are_what_dumps_for_storage_writes(tmp_path: Path) -> None:
    value = {"a": [1, 2.5, "é", None, True], "b": {"c": "\ud800"}, "n": 10**25}
    store, path = stored(tmp_path, value)
    assert path.read_bytes() == dumps_for_storage(value)
    assert json.loads(path.read_bytes()) == value


def test_a_count_too_big_for_four_bytes_gets_wide_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts are kept as count << 3 | kind: beyond 29 bits (a value of 512 M characters)
    the index takes 8-byte records, from the value and from the file alike."""
    value = {"big": "x" * 100, "small": [1]}
    data = dumps_for_storage(value)
    narrow = json_index_from_value(value, data)
    real_kinds = json_index_module._kinds_and_counts
    monkeypatch.setattr(
        json_index_module,
        "_kinds_and_counts",
        lambda values: [n | (1 << 40) if n >> 3 == 100 else n for n in real_kinds(values)],
    )
    wide = json_index_from_value(value, data)
    assert narrow is not None and wide is not None and len(wide) > len(narrow)
    path = tmp_path / "blob.json"
    path.write_bytes(data)
    with opened(path, wide) as index:
        assert index.width == 8
        assert index.value(index.find(index.root().table, "big")) == "x" * 100


def test_a_name_whose_escaped_quote_looks_like_a_separator_is_indexed_from_the_value(
    tmp_path: Path,
) -> None:
    value = {"": {'",': None, "": None, 'a","b': 1}}  # found by the property test above
    data = dumps_for_storage(value)
    path = tmp_path / "blob.json"
    path.write_bytes(data)
    with FileReader(path, "json") as blob:
        assert json_index_from_value(value, data) == json_index_from_file(blob)
