"""The search index (blobviewer.search.indexing): chunks of folded text with a trigram index, and
how much of each blob search has read.

SQLite: an FTS5 table with the trigram tokenizer (SQLite 3.34 or later) over the chunks'
folded text, kept in step by triggers. The index keeps each trigram's positions, so a
query is a phrase of consecutive trigrams, answered from the index alone (a
positionless index would have to read every candidate chunk to check it: many times
slower for a common word). PostgreSQL: the pg_trgm extension (trusted, so the
database owner may create it) and a GIN trigram index on the folded text.

Sessions, items and blobs recorded before this migration are indexed by it.
"""

import django.db.models.deletion
from django.db import migrations, models

FTS = "blobviewer_searchchunk_fts"
CHUNKS = "blobviewer_searchchunk"

SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, content='{CHUNKS}', content_rowid='id', "
    "tokenize='trigram case_sensitive 1')",
    f"CREATE TRIGGER {CHUNKS}_ai AFTER INSERT ON {CHUNKS} BEGIN "
    f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, new.folded); END",
    f"CREATE TRIGGER {CHUNKS}_ad AFTER DELETE ON {CHUNKS} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, old.folded); END",
    f"CREATE TRIGGER {CHUNKS}_au AFTER UPDATE ON {CHUNKS} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, old.folded); "
    f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, new.folded); END",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {CHUNKS}_au",
    f"DROP TRIGGER IF EXISTS {CHUNKS}_ad",
    f"DROP TRIGGER IF EXISTS {CHUNKS}_ai",
    f"DROP TABLE IF EXISTS {FTS}",
]
POSTGRES_FORWARD = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    f"CREATE INDEX searchchunk_folded_trgm ON {CHUNKS} USING gin (folded gin_trgm_ops)",
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS searchchunk_folded_trgm"]


def _run(schema_editor, statements_by_vendor):
    connection = schema_editor.connection
    statements = statements_by_vendor.get(connection.vendor)
    if statements is None:
        raise RuntimeError(f"search needs SQLite or PostgreSQL, not {connection.vendor}")
    if connection.vendor == "sqlite":
        import sqlite3

        if sqlite3.sqlite_version_info < (3, 34, 0):
            raise RuntimeError(
                "search needs SQLite 3.34 or later (FTS5 with the trigram tokenizer); "
                f"this is {sqlite3.sqlite_version}"
            )
    for statement in statements:
        schema_editor.execute(statement)


def create_trigram_index(apps, schema_editor):
    _run(schema_editor, {"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD})


def drop_trigram_index(apps, schema_editor):
    _run(schema_editor, {"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD})


def index_what_is_recorded(apps, schema_editor):
    """Titles, items and the blobs the store has, as ingest would have indexed them."""
    from blobviewer.search import indexing as search
    from blobviewer.data_dir import blob_store
    from core.store import BlobStoreError

    Session = apps.get_model("blobviewer", "Session")
    Item = apps.get_model("blobviewer", "Item")
    Blob = apps.get_model("blobviewer", "Blob")
    SearchChunk = apps.get_model("blobviewer", "SearchChunk")
    SearchedBlob = apps.get_model("blobviewer", "SearchedBlob")
    alias = schema_editor.connection.alias

    def rows(text, **fields):
        for chunk in search.text_chunks(search.storable(text)):
            yield SearchChunk(
                start=chunk.start,
                line=chunk.line,
                text=chunk.text,
                folded=chunk.text.casefold(),
                **fields,
            )

    batch = []

    def add(new_rows):
        batch.extend(new_rows)
        if len(batch) >= 200:
            SearchChunk.objects.using(alias).bulk_create(batch)
            batch.clear()

    for session_id, title in Session.objects.using(alias).values_list("id", "title").iterator():
        add(rows(title, session_id=session_id, source="title"))
    items = Item.objects.using(alias).only("id", "session_id", "text", "tool_calls", "output")
    for item in items.iterator(chunk_size=500):
        fields = {"session_id": item.session_id, "item_id": item.id}
        add(rows(item.text, source="text", **fields))
        add(rows(search.calls_text(item.tool_calls), source="calls", **fields))
        add(rows(item.output, source="output", **fields))
    store = blob_store()
    limit = search.blob_bytes_limit()
    present = Blob.objects.using(alias).filter(missing=False, error="").values_list("id", flat=True)
    for blob_id in present.iterator():
        try:
            text, total = search.blob_search_text(store, blob_id, limit=limit)
        except (BlobStoreError, OSError, UnicodeDecodeError):
            continue  # indexed when ingest or an upload next brings it
        add(rows(text, blob_id=blob_id, source="blob"))
        indexed = len(text.encode("utf-8", "surrogatepass"))
        SearchedBlob.objects.using(alias).create(
            blob_id=blob_id, indexed_bytes=indexed, total_bytes=total
        )
    if batch:
        SearchChunk.objects.using(alias).bulk_create(batch)


class Migration(migrations.Migration):
    dependencies = [
        ("blobviewer", "0005_team_server_and_timeline"),
    ]

    operations = [
        migrations.CreateModel(
            name="SearchedBlob",
            fields=[
                (
                    "blob",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="search_index",
                        serialize=False,
                        to="blobviewer.blob",
                    ),
                ),
                ("indexed_bytes", models.BigIntegerField()),
                ("total_bytes", models.BigIntegerField()),
                ("indexed_at", models.DateTimeField(auto_now=True)),
            ],
        ),
        # The keys come before the texts: SQLite keeps a row's columns in order, and a
        # chunk's 64 K-character texts would otherwise lie between a lookup and its keys.
        migrations.CreateModel(
            name="SearchChunk",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "blob",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="search_chunks",
                        to="blobviewer.blob",
                    ),
                ),
                (
                    "item",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="search_chunks",
                        to="blobviewer.item",
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="search_chunks",
                        to="blobviewer.session",
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        choices=[
                            ("title", "Title"),
                            ("text", "Text"),
                            ("calls", "Calls"),
                            ("output", "Output"),
                            ("blob", "Blob"),
                        ],
                        max_length=10,
                    ),
                ),
                ("start", models.BigIntegerField(default=0)),
                ("line", models.BigIntegerField(default=1)),
                ("text", models.TextField()),
                ("folded", models.TextField()),
            ],
            options={
                "indexes": [models.Index(fields=["source"], name="searchchunk_source")],
            },
        ),
        migrations.RunPython(create_trigram_index, drop_trigram_index),
        migrations.RunPython(index_what_is_recorded, migrations.RunPython.noop),
    ]
