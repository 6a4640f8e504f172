"""Facts about blobs, read once from the store and kept in Blob rows.

Kind, size and counts come from the store; a text blob also gets its line index, so a
page deep inside a 100 MB blob later reads only the lines it shows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone

from blobviewer.data_dir import renderings
from blobviewer.models import Blob
from core.blob_id import blob_created_at
from core.blob_store import BlobNotFound, BlobStoreError, FsBlobStore
from core.content import Text, content_kind
from core.json_values import dumps_indented
from core.line_index import LineIndex


def index_blobs(blob_ids: Iterable[uuid.UUID], *, store: FsBlobStore) -> dict[uuid.UUID, Blob]:
    """A Blob row for every id; new ids and ones missing so far are (re)read from the store."""
    ids = set(blob_ids)
    rows = Blob.objects.in_bulk(list(ids))
    for blob_id in ids:
        row = rows.get(blob_id)
        if row is None or row.missing or row.error:
            rows[blob_id] = refresh_blob(blob_id, store=store, row=row)
    return rows


def index_new_blobs(*, store: FsBlobStore) -> int:
    """Index the blobs the store has and the index does not know yet (agents and the CLI
    write blobs that no ingested session references); returns how many were added.

    The store is only listed when its directory changed since this process last looked
    (a new or removed file changes the directory's modification time).
    """
    try:
        stamp = (str(store.root), store.root.stat().st_mtime_ns)
    except OSError:
        return 0
    if _last_listed.get(stamp[0]) == stamp[1]:
        return 0
    known = set(Blob.objects.values_list("id", flat=True))
    new = [blob_id for blob_id in store.ids_sync() if blob_id not in known]
    for blob_id in new:
        refresh_blob(blob_id, store=store)
    _last_listed[stamp[0]] = stamp[1]
    return len(new)


_last_listed: dict[str, int] = {}  # store directory -> its mtime when last listed


def blob_for_view(blob_id: uuid.UUID, *, store: FsBlobStore) -> Blob | None:
    """The Blob row a page shows, in step with the store; None when neither knows the id.

    A blob the store has but no session references yet is indexed on first view; one
    that has appeared in (or vanished from) the store since it was indexed is re-read.
    """
    row = Blob.objects.filter(id=blob_id).first()
    try:
        on_disk = store.exists_sync(blob_id)
    except BlobStoreError:
        on_disk = False
    if row is None:
        return refresh_blob(blob_id, store=store) if on_disk else None
    if on_disk == row.missing or (on_disk and row.error):
        return refresh_blob(blob_id, store=store, row=row)
    return row


def refresh_blob(blob_id: uuid.UUID, *, store: FsBlobStore, row: Blob | None = None) -> Blob:
    """Read the blob's facts from the store into its row (created if needed) and save it."""
    row = row or Blob(id=blob_id)
    row.created_at = blob_created_at(blob_id)
    row.indexed_at = timezone.now()
    row.kind, row.size, row.count, row.line_index, row.error = "", None, None, None, ""
    row.missing = False
    try:
        path = store.path_of(blob_id)
        row.size = path.stat().st_size
        if path.suffix == ".txt":
            _index_text(row, path)
        else:
            content = store.load_sync(blob_id)
            row.kind = content_kind(content)
            value = content.value
            row.count = len(value) if isinstance(value, list | dict) else None
            if row.size >= RENDER_JSON_FROM_BYTES:
                _index_rendering(row, value)
    except (BlobNotFound, FileNotFoundError):
        row.missing = True
        row.size = None
    except (BlobStoreError, OSError) as error:
        row.error = str(error)[:500]
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:  # another request indexed it at the same moment: same facts
        row.save(force_update=True)
    return row


# A JSON blob this big gets its indented rendering written once, with a line index, so
# its pages need not parse the whole blob on every request.
RENDER_JSON_FROM_BYTES = 1 << 20


def _index_rendering(row: Blob, value: object) -> None:
    rendered = renderings()
    rendered.put_sync(row.id, Text(dumps_indented(value)))  # False: already rendered
    row.line_index = LineIndex.build(rendered.path_of(row.id)).to_json()


def _index_text(row: Blob, path: Path) -> None:
    index = LineIndex.build(path)
    row.kind = "text"
    row.count = index.line_count
    row.line_index = index.to_json()
