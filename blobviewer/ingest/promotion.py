"""Promotion on the way in: tool outputs a recording kept whole go through core's
promotion as a live Worker's would have, so an output over the threshold is stored as a
blob and its item keeps the summary (docs/promotion.md). Only new items are promoted, so
ingesting a recording again stores nothing twice; a rebuild keeps the blob an output had
when it is still what promotion would store. Each blob's id goes into the ingest's journal
before the blob is written (blobviewer.ingest.journal), so that the blobs of an ingest
killed before its transaction committed are found and removed."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from blobviewer.catalog.blobs import BlobFacts, discard_derived, stored_blob_facts
from blobviewer.ingest.errors import IngestError
from blobviewer.ingest.journal import IngestJournal
from blobviewer.ingest.rows import PendingItem, promoted_blob_id
from blobviewer.models import Blob
from core.agent.policy import Policy
from core.content import Content, Stored, Text, encode_text, utf8_size
from core.json_values import dumps_for_storage
from core.promotion import promote
from core.store import BlobStore
from core.store.blob_id import BLOB_REF, new_blob_id
from core.store.errors import BlobIOError, BlobStoreError
from core.summary import summarize


class Promotions:
    """The outputs one ingest of a session promotes into *store* under *policy*, and what
    that did: the blobs it wrote (to discard should the ingest fail), the rows of those
    made from the content in hand (see stored_blob_facts), and the old blobs a rebuild
    kept. Its journal lists the blobs written until committed() or discard() says what
    became of them."""

    def __init__(self, store: BlobStore, policy: Policy, source_path: str) -> None:
        self.store = store
        self.policy = policy
        self.source_path = source_path
        self.written: list[uuid.UUID] = []
        self.stored: dict[uuid.UUID, Blob] = {}
        self.reused: list[uuid.UUID] = []
        self.journal = IngestJournal()

    def promoted(
        self, record: Mapping[str, Any], *, reuse: uuid.UUID | None = None
    ) -> Mapping[str, Any]:
        """*record*, its tool output (or, where its importer asks with `promote_text`, its
        message text) promoted when the recording kept a big one whole.

        Text that already starts with `[blob:<id>]` is a summary our Worker wrote, or an
        inspect result (never promoted), and passes as it is. When the blob *reuse* (the
        one the item had before a rebuild) holds exactly what promotion would store, the
        text is summarised under that id and nothing is stored: share links to it keep
        working. A tool output records how big it was (`received_bytes`).
        """
        found = _promotable(record)
        if found is None:
            return record
        name, text = found
        promoted = promote(text, self.policy)
        if not isinstance(promoted, Stored):
            return record
        sized = {"received_bytes": utf8_size(text)} if name == "output" else {}
        if reuse is not None and _holds(self.store, reuse, promoted.content):
            self.reused.append(reuse)
            summary = summarize(reuse, promoted.content, self.policy)
            return {**record, name: summary, **sized}
        try:
            summary, blob_id = self._store(promoted)
        except (BlobStoreError, OSError) as error:  # the journal's OSError too
            # The store's own message may name its folder: that is for the operator only.
            raise IngestError(
                self.source_path,
                None,
                f"seq {record.get('seq')}: the blob store cannot store its {_WHAT[name]}",
                detail=str(error),
            ) from None
        return {**record, name: summary, **sized}

    def _store(self, promoted: Stored) -> tuple[str, uuid.UUID]:
        """Store *promoted* under a new id, journaled first (so no blob of this ingest is
        ever unjournaled); its summary and blob id. Raises BlobStoreError or OSError."""
        blob_id = new_blob_id()
        self.journal.record(blob_id)
        self.written.append(blob_id)  # before the write: one that fails half way goes too
        if not self.store.put_sync(blob_id, promoted.content):
            self.written.pop()  # the id is another blob's (it was new): never discard that
            raise BlobIOError(f"cannot write blob {blob_id}: its new id is taken")
        row = stored_blob_facts(blob_id, promoted.content, store=self.store)
        if row is not None:
            self.stored[blob_id] = row
        return summarize(blob_id, promoted.content, self.policy), blob_id

    def committed(self) -> None:
        """The transaction that references the blobs written has committed, or will with
        the caller's (an upload's): the journal goes then. Should the caller's transaction
        roll back instead, the journal is left for blobviewer.ingest.journal to settle."""
        transaction.on_commit(self.journal.remove)

    def discard(self) -> None:
        """Delete the blobs written, files, renderings and rows (the ingest failed), then
        the journal; should that fail, the journal is left to settle what remains."""
        try:
            for blob_id in self.written:
                self.store.discard_sync(blob_id)
                if blob_id not in self.stored:  # a big JSON blob may have a rendering
                    discard_derived(blob_id)
            Blob.objects.filter(id__in=self.written).delete()
        except BaseException:
            self.journal.close()
            raise
        self.journal.remove()


def size_promoted(
    items: list[PendingItem], records: list[Mapping[str, Any]], facts: BlobFacts
) -> None:
    """Received bytes of outputs promoted before ingest (our own logs: the output is the
    summary): the blob's size, when the store has the blob. Outputs ingest promoted
    itself carry theirs in the record."""
    for item, record in zip(items, records, strict=True):
        if "received_bytes" in record:
            continue
        blob_id = promoted_blob_id(item)
        blob = facts.rows.get(blob_id) if blob_id is not None else None
        if blob is not None and not blob.missing and blob.size is not None:
            item.received_bytes = blob.size


_WHAT = {"output": "output", "text": "message"}


def _promotable(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """The field and text promotion may store: a tool result's output, or a message's
    text when its importer asks (`promote_text`: the OTLP receiver's payloads); not a
    summary already."""
    kind = record.get("type")
    if kind == "tool_result":
        name = "output"
    elif kind in ("user", "assistant") and record.get("promote_text") is True:
        name = "text"
    else:
        return None
    text = record.get(name)
    if not isinstance(text, str) or BLOB_REF.match(text):
        return None
    return name, text


def _holds(store: BlobStore, blob_id: uuid.UUID, content: Content) -> bool:
    """Whether the store's blob *blob_id* is byte for byte what storing *content* writes."""
    try:
        with store.open_sync(blob_id) as blob:
            if isinstance(content, Text):
                data, kind = encode_text(content.text), "text"
            else:
                data, kind = dumps_for_storage(content.value), "json"
            return blob.kind == kind and blob.size == len(data) and blob.read(0, len(data)) == data
    except (BlobStoreError, OSError, TypeError, ValueError, RecursionError):
        return False  # unreadable or unencodable: store the output anew
