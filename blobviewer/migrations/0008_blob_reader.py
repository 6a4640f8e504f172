"""Provenance and sharing in place (docs/pages.md#where-a-blob-came-from, docs/team.md#sharing):
which step made each blob (`Blob.made_by`, with its call in one line), each blob's
first-line preview, a note on share links, and indexes for the blob list's sorts.

Blobs recorded before this migration get their maker and preview here, as ingest and
`blobs index` would have given them: makers from the items (a row at a time, so memory
stays bounded whatever the size of the database), previews from the store (a few KB of
each blob's file; a blob the store lacks keeps an empty preview).
"""

import django.db.models.deletion
from django.db import migrations, models


def fill_makers_and_previews(apps, schema_editor):
    from django.db.models.functions import Substr

    from blobviewer.data_dir import blob_store
    from blobviewer.catalog.provenance import calls_in, made_blob, read_preview, step_title
    from core.store import BlobStoreError

    Blob = apps.get_model("blobviewer", "Blob")
    Item = apps.get_model("blobviewer", "Item")
    alias = schema_editor.connection.alias
    blobs = Blob.objects.using(alias)

    # Makers: promoted tool results, first recorded first (the first maker of a blob keeps
    # it). Only the start of each output leaves the database: `[blob:<id>]` is 43 chars.
    results = (
        Item.objects.using(alias)
        .filter(type="tool_result", output__startswith="[blob:")
        .exclude(tool="inspect")
        .annotate(head=Substr("output", 1, 43))
        .order_by("session_id", "seq")
        .values_list("pk", "session_id", "seq", "tool", "call_id", "head")
    )
    session, makers = None, []
    for row in results.iterator(chunk_size=2000):
        if row[1] != session:
            _link_session(Item, blobs, alias, session, makers, made_blob, calls_in, step_title)
            session, makers = row[1], []
        makers.append(row)
    _link_session(Item, blobs, alias, session, makers, made_blob, calls_in, step_title)

    store = blob_store()
    present = blobs.filter(missing=False, error="").values_list("id", flat=True)
    for blob_id in present.iterator(chunk_size=2000):
        try:
            blob = store.open_sync(blob_id)
        except BlobStoreError:
            continue
        with blob:
            preview = read_preview(blob)
        if preview:
            blobs.filter(id=blob_id).update(preview=preview)


def _link_session(Item, blobs, alias, session, makers, made_blob, calls_in, step_title):
    """Link the blobs that one session's promoted results made, titled by their calls."""
    if not makers:
        return
    wanted = {}
    for pk, _, _, tool, call_id, head in makers:
        blob_id = made_blob("tool_result", tool, head)
        if blob_id is not None:
            wanted.setdefault(blob_id, (pk, tool, call_id))
    call_ids = {call_id for _, _, call_id in wanted.values() if call_id}
    calls = {}
    if call_ids:
        # The session's calls, one assistant item at a time; only the wanted ones are kept.
        assistants = (
            Item.objects.using(alias)
            .filter(session_id=session, type="assistant")
            .values_list("tool_calls", flat=True)
        )
        for tool_calls in assistants.iterator(chunk_size=100):
            for call_id, name, arguments in calls_in(tool_calls):
                if call_id in call_ids and call_id not in calls:
                    calls[call_id] = (name, arguments)
    for blob_id, (pk, tool, call_id) in wanted.items():
        name, arguments = calls.get(call_id, (tool, None))
        blobs.filter(id=blob_id, made_by__isnull=True).update(
            made_by_id=pk, made_by_title=step_title(name or tool, arguments)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("blobviewer", "0006_search_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="blob",
            name="made_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="made_blobs",
                to="blobviewer.item",
            ),
        ),
        migrations.AddField(
            model_name="blob",
            name="made_by_title",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="blob",
            name="preview",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name="sharelink",
            name="note",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["created_at", "id"], name="blob_created"),
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["size", "id"], name="blob_size"),
        ),
        migrations.RunPython(fill_makers_and_previews, migrations.RunPython.noop),
    ]
