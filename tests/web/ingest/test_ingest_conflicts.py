"""Two ingests of one session at once (another file of it, an upload, another process):
the one that commits second finds its rows taken, throws away what it stored, plans
again from what the other wrote and adds only what is new."""

from __future__ import annotations

import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.db import IntegrityError, connection

from blobviewer.ingest import sessions as ingest_module
from blobviewer.ingest import writing
from blobviewer.ingest.sessions import IngestResult, ingest_recordings, ingest_session
from blobviewer.models import Blob, BlobRef, Item
from core.store import FsBlobStore
from importers.recordings import CLAUDE_CODE
from web.records import BUILD_LOG, header, tool_result_item, user_item

# Outside a test's transaction: inside one, a conflict is not tried again.
pytestmark = pytest.mark.django_db(transaction=True)


def test_an_ingest_that_meets_a_session_committed_meanwhile_plans_again(
    store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = uuid.uuid4()
    head = header(session_id)
    first = [user_item(1, "one"), tool_result_item(2, BUILD_LOG)]
    grown = [*first, user_item(3, "three")]
    real = ingest_module.catalog_blobs
    calls = []

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:  # after this ingest's plan: another one records the session
            other = threading.Thread(
                target=lambda: (
                    ingest_session(head, first, source_path="other", store=store),
                    connection.close(),
                )
            )
            other.start()
            other.join()
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "catalog_blobs", racing)
    result = ingest_session(head, grown, source_path="this", store=store)

    assert len(calls) >= 2  # planned again
    assert result.new_items == 1 and result.total_items == 3
    seqs = Item.objects.filter(session_id=session_id).values_list("seq", flat=True)
    assert sorted(seqs) == [1, 2, 3]
    # The first try's blob was discarded: one blob, the other ingest's.
    assert Blob.objects.count() == 1
    assert len(list(store.ids_sync())) == 1


def test_a_conflict_tried_again_stores_its_outputs_anew(
    tmp_path: Path, store: FsBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries = []
    insert_items = writing._insert_items

    def conflicting_once(*args: Any, **kwargs: Any) -> None:
        tries.append(len(tries) + 1)
        if len(tries) == 1:  # another ingest took this session's seqs meanwhile
            raise IntegrityError("UNIQUE constraint failed: blobviewer_item.session_id")
        insert_items(*args, **kwargs)

    monkeypatch.setattr(writing, "_insert_items", conflicting_once)
    path = tmp_path / CLAUDE_CODE.name
    shutil.copyfile(CLAUDE_CODE, path)
    [(_, result)] = ingest_recordings(path, store=store)

    assert tries == [1, 2]
    assert isinstance(result, IngestResult) and result.new_items == 299
    # The first try's blobs went with it; the second stored its own.
    assert len(result.stored_blobs) > 10
    assert {blob.rsplit(".", 1)[0] for blob in (p.name for p in store.root.iterdir())} == {
        str(blob_id) for blob_id in Blob.objects.values_list("id", flat=True)
    }
    for blob_id in BlobRef.objects.values_list("blob_id", flat=True):
        assert store.exists_sync(blob_id)
