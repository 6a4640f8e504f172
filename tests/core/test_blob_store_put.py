"""FsBlobStore.put_sync: storing a blob under an id made on another machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.content import Structured, Text
from core.store import FsBlobStore
from core.store.blob_id import new_blob_id
from core.store.errors import InvalidBlobId


def test_it_stores_under_the_given_id_and_loads_back(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    text_id, json_id = new_blob_id(), new_blob_id()
    assert store.put_sync(text_id, Text("hello\n")) is True
    assert store.put_sync(str(json_id), Structured({"a": [1, 2]})) is True
    assert store.load_sync(text_id) == Text("hello\n")
    assert store.load_sync(json_id) == Structured({"a": [1, 2]})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{text_id}.txt", f"{json_id}.json"]
    )


def test_an_existing_blob_is_never_overwritten(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = new_blob_id()
    store.put_sync(blob_id, Text("first"))
    assert store.put_sync(blob_id, Text("second")) is False
    assert store.put_sync(blob_id, Structured([1])) is False
    assert store.load_sync(blob_id) == Text("first")


def test_an_invalid_id_touches_nothing(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs")
    with pytest.raises(InvalidBlobId):
        store.put_sync("../escape", Text("x"))
    assert not (tmp_path / "blobs").exists()


def test_ids_lists_the_stored_blobs_and_nothing_else(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    stored = {store.store_sync(Text("a")), store.store_sync(Structured([1]))}
    (tmp_path / ".tmp-abc").write_bytes(b"half written")
    (tmp_path / "notes.txt").write_text("not a blob")
    (tmp_path / f"{str(next(iter(stored))).upper()}.txt").write_text("not canonical")
    assert set(store.ids_sync()) == stored
    assert list(FsBlobStore(tmp_path / "absent").ids_sync()) == []
