"""FsBlobStore.put_sync and ids_sync, what only a folder shows (the contract every store
keeps, no-clobber puts included, is in test_store_contract.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.content import Structured, Text
from core.store import FsBlobStore
from core.store.errors import InvalidBlobId


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
