"""The blobs ingest promotes a recording's outputs to: every one in the store, byte for byte,
in the order promotion made them, with its row made from the content in hand; a blob that
cannot be written fails the file's ingest, naming its item, with nothing kept."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.sessions import ingest_session
from blobviewer.models import Blob, Item, Session
from core.content import Structured, Text
from core.promotion import promote
from core.store import FsBlobStore
from core.store.errors import BlobIOError
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

OUTPUTS = [
    "".join(f"line {n} of output {k}\n" for n in range(200))
    if k % 2
    else f"[{k}" + ",1" * 900 + "]"
    for k in range(12)
]


def records() -> list[dict[str, Any]]:
    return [user_item(1, "go")] + [
        tool_result_item(seq, output, call_id=f"c{seq}") for seq, output in enumerate(OUTPUTS, 2)
    ]


def test_every_blob_is_stored_as_promotion_made_it(store: FsBlobStore) -> None:
    result = ingest_session(header(), records(), source_path="/run.jsonl", store=store)

    assert len(result.stored_blobs) == len(OUTPUTS)
    assert list(result.stored_blobs) == sorted(result.stored_blobs)  # ids in promotion order
    outputs = (
        Item.objects.filter(type="tool_result").order_by("seq").values_list("output", flat=True)
    )
    for output, blob_id, written in zip(OUTPUTS, result.stored_blobs, outputs, strict=True):
        content = promote(output).content
        assert written.startswith(f"[blob:{blob_id}]")
        assert store.load_sync(blob_id) == content
        assert isinstance(content, Text if output.startswith("line") else Structured)
        row = Blob.objects.get(id=blob_id)
        assert (row.size, row.missing) == (store.size_sync(blob_id), False)


def test_a_blob_that_cannot_be_written_fails_the_ingest_with_nothing_kept(
    store: FsBlobStore,
) -> None:
    calls = []
    put_sync = FsBlobStore.put_sync

    def full_after_three(self: FsBlobStore, blob_id: Any, content: Any) -> Any:
        calls.append(content)
        if len(calls) > 3:
            raise BlobIOError(f"cannot write to {self.root}: No space left on device")
        return put_sync(self, blob_id, content)

    session_id = uuid.uuid4()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FsBlobStore, "put_sync", full_after_three)
        with pytest.raises(IngestError) as raised:
            ingest_session(header(session_id), records(), source_path="/run.jsonl", store=store)

    # The fourth output (seq 5) is the first the store could not keep.
    assert raised.value.message == "seq 5: the blob store cannot store its output"
    assert "No space left on device" in str(raised.value)
    assert str(store.root) not in raised.value.message
    assert not Session.objects.filter(id=session_id).exists()
    assert not Blob.objects.exists()
    assert list(store.ids_sync()) == []  # the three written are discarded again
