"""What every importer's tests check of an ingested session: each big tool output is its
blob byte for byte, each small one stays in the history as it was recorded."""

from __future__ import annotations

from typing import Any

from blobviewer.data_dir import blob_store
from blobviewer.models import Session
from core.content import Stored, utf8_size
from core.promotion import promote
from core.redaction import redact_item
from core.store.blob_id import BLOB_REF


def assert_big_outputs_read_back(records: list[dict[str, Any]], session: Session) -> int:
    """Every tool output over 800 bytes in *records* is its blob, byte for byte (its
    secrets redacted, as ingest stores it: core.redaction), and counts its received bytes;
    every smaller one is the item's output as is. Returns how many outputs were big."""
    store = blob_store()
    items = {item.seq: item for item in session.items.all()}
    big = 0
    for record in records:
        if record["type"] != "tool_result":
            continue
        item = items[record["seq"]]
        output = redact_item(record)["output"]
        promoted = promote(output)
        if not isinstance(promoted, Stored):
            assert item.output == output
            continue
        big += 1
        blob_id = BLOB_REF.match(item.output).group(1)
        assert store.load_sync(blob_id) == promoted.content
        assert item.received_bytes == utf8_size(output)
    return big
