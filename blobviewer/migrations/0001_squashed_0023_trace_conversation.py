"""The schema as migrations 0001 to 0023 leave it, made in one step: a new database is
set up in a third of the time (each of the 23 steps rebuilt the models' state, and on
SQLite most added columns rebuilt their table). A database that has some of those
migrations applied goes on with them (Django runs a squashed migration only where none of
the ones it replaces is applied); they stay until every database has passed 0023.

Besides the models: the search index in its final form (0006, 0012, 0013: SQLite's FTS5
trigram table, contentless and positionless, fed by triggers; PostgreSQL's pg_trgm GIN
index on the folded text) and lz4 compression of the long text columns (0010). The data
those migrations filled in (0005, 0006, 0008) has no rows to fill in a new database.
"""

import django.db.models.deletion
import django.db.models.functions.comparison
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import blobviewer.models

FTS = "blobviewer_searchchunk_fts"
CHUNKS = "blobviewer_searchchunk"
# What search reads of a chunk: its folded copy, or its text with ASCII capitals lowered.
SQLITE_SEARCHED = "COALESCE({row}folded, lower({row}text))"
POSTGRES_SEARCHED = 'COALESCE(folded, lower(text COLLATE "C"))'


def _sqlite_index() -> list[str]:
    old, new = (SQLITE_SEARCHED.format(row=prefix) for prefix in ("old.", "new."))
    return [
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, content='', "
        "tokenize='trigram case_sensitive 1', detail=none, columnsize=0)",
        f"CREATE TRIGGER {CHUNKS}_ai AFTER INSERT ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
        f"CREATE TRIGGER {CHUNKS}_ad AFTER DELETE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER {CHUNKS}_au AFTER UPDATE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
    ]


FORWARD = {
    "sqlite": _sqlite_index(),
    "postgresql": [
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
        f"CREATE INDEX searchchunk_searched_trgm ON {CHUNKS} "
        f"USING gin (({POSTGRES_SEARCHED}) gin_trgm_ops)",
    ],
}
BACKWARD = {
    "sqlite": [
        f"DROP TRIGGER IF EXISTS {CHUNKS}_au",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ad",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ai",
        f"DROP TABLE IF EXISTS {FTS}",
    ],
    "postgresql": ["DROP INDEX IF EXISTS searchchunk_searched_trgm"],
}


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


def create_search_index(apps, schema_editor):
    _run(schema_editor, FORWARD)


def drop_search_index(apps, schema_editor):
    _run(schema_editor, BACKWARD)


# PostgreSQL: the long text columns that ingest and search indexing write, compressed with
# lz4 where the server has it (0010 says why).
COMPRESSED = [
    ("blobviewer_item", "text"),
    ("blobviewer_item", "output"),
    ("blobviewer_item", "tool_calls"),
    ("blobviewer_searchchunk", "text"),
    ("blobviewer_searchchunk", "folded"),
]


def compress_with_lz4(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    if not (row and row[0]):
        return
    quote = schema_editor.quote_name
    for table, column in COMPRESSED:
        schema_editor.execute(
            f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(column)} SET COMPRESSION lz4"
        )


class Migration(migrations.Migration):
    initial = True

    replaces = [
        ("blobviewer", "0001_initial"),
        ("blobviewer", "0002_api_token"),
        ("blobviewer", "0003_item_role_sidechain"),
        ("blobviewer", "0004_item_digest"),
        ("blobviewer", "0005_team_server_and_timeline"),
        ("blobviewer", "0006_search_index"),
        ("blobviewer", "0007_drop_blob_line_index"),
        ("blobviewer", "0008_blob_reader"),
        ("blobviewer", "0009_fewer_indexes"),
        ("blobviewer", "0010_lz4_compression"),
        ("blobviewer", "0011_ingested_files"),
        ("blobviewer", "0012_lean_search_index"),
        ("blobviewer", "0013_folded_only_where_needed"),
        ("blobviewer", "0014_blob_replaced_by"),
        ("blobviewer", "0015_item_title"),
        ("blobviewer", "0016_session_started_index"),
        ("blobviewer", "0017_search_chunk_source_session_index"),
        ("blobviewer", "0018_ingested_file_carry"),
        ("blobviewer", "0019_redactions"),
        ("blobviewer", "0020_evaluation_runs_and_cost"),
        ("blobviewer", "0021_session_unpriced_turns"),
        ("blobviewer", "0022_api_token_request_window"),
        ("blobviewer", "0023_trace_conversation"),
    ]

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Blob",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("kind", models.CharField(blank=True, max_length=20)),
                ("size", models.BigIntegerField(blank=True, null=True)),
                ("count", models.BigIntegerField(blank=True, null=True)),
                ("created_at", models.DateTimeField(blank=True, null=True)),
                ("missing", models.BooleanField(default=False)),
                ("error", models.CharField(blank=True, max_length=500)),
                ("indexed_at", models.DateTimeField(blank=True, null=True)),
                ("made_by_title", models.CharField(blank=True, max_length=200)),
                ("preview", models.CharField(blank=True, max_length=300)),
                (
                    "replaced_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="replaces",
                        to="blobviewer.blob",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="IngestedFile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("path", models.CharField(max_length=1000, unique=True)),
                ("device", models.BigIntegerField()),
                ("inode", models.BigIntegerField()),
                ("size", models.BigIntegerField()),
                ("mtime_ns", models.BigIntegerField()),
                ("edges", models.CharField(max_length=64)),
                ("shape", models.CharField(max_length=64)),
                ("sessions", models.PositiveIntegerField()),
                ("format", models.CharField(blank=True, max_length=50)),
                ("offset", models.BigIntegerField(default=0)),
                ("lines", models.BigIntegerField(default=0)),
                ("prefix", models.CharField(blank=True, max_length=64)),
                ("ingested_at", models.DateTimeField(auto_now=True)),
                ("carry", models.JSONField(blank=True, null=True)),
            ],
        ),
        migrations.CreateModel(
            name="Item",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("seq", models.PositiveIntegerField()),
                (
                    "type",
                    models.CharField(
                        choices=[
                            ("user", "User"),
                            ("assistant", "Assistant"),
                            ("tool_result", "Tool Result"),
                        ],
                        max_length=20,
                    ),
                ),
                ("at", models.DateTimeField(blank=True, null=True)),
                ("text", models.TextField(blank=True)),
                ("tool_calls", models.JSONField(blank=True, default=list)),
                ("call_id", models.CharField(blank=True, max_length=200)),
                ("tool", models.CharField(blank=True, max_length=200)),
                ("output", models.TextField(blank=True)),
                ("is_error", models.BooleanField(default=False)),
                ("output_bytes", models.BigIntegerField(default=0)),
                ("received_bytes", models.BigIntegerField(default=0)),
                ("role", models.CharField(blank=True, max_length=50)),
                ("sidechain", models.BooleanField(default=False)),
                ("digest", models.CharField(blank=True, max_length=64)),
                ("context_tokens", models.BigIntegerField(blank=True, null=True)),
                ("duration", models.DurationField(blank=True, null=True)),
                ("input_tokens", models.BigIntegerField(blank=True, null=True)),
                ("note", models.TextField(blank=True)),
                ("output_tokens", models.BigIntegerField(blank=True, null=True)),
                ("title", models.CharField(blank=True, max_length=200)),
                ("redactions", models.PositiveIntegerField(default=0)),
                ("cache_read_tokens", models.BigIntegerField(blank=True, null=True)),
                ("cache_write_tokens", models.BigIntegerField(blank=True, null=True)),
                ("cost_usd", models.FloatField(blank=True, null=True)),
            ],
            options={
                "ordering": ["session", "seq"],
            },
        ),
        migrations.CreateModel(
            name="PrunedBlob",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("pruned_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["-pruned_at"],
            },
        ),
        migrations.CreateModel(
            name="PrunedSession",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("title", models.CharField(blank=True, max_length=500)),
                ("pruned_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "ordering": ["-pruned_at"],
            },
        ),
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("token_hash", models.CharField(editable=False, max_length=64, unique=True)),
                ("prefix", models.CharField(editable=False, max_length=16)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("window_minute", models.BigIntegerField(default=0, editable=False)),
                ("window_requests", models.PositiveIntegerField(default=0, editable=False)),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
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
        migrations.CreateModel(
            name="Session",
            fields=[
                ("id", models.UUIDField(primary_key=True, serialize=False)),
                ("title", models.CharField(blank=True, max_length=500)),
                ("model", models.CharField(blank=True, max_length=200)),
                ("meta", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField()),
                ("source_path", models.CharField(blank=True, db_index=True, max_length=1000)),
                ("source_format", models.CharField(default="blobviewer", max_length=50)),
                ("item_count", models.PositiveIntegerField(default=0)),
                ("tool_result_count", models.PositiveIntegerField(default=0)),
                ("blob_count", models.PositiveIntegerField(default=0)),
                ("output_bytes_received", models.BigIntegerField(default=0)),
                ("output_bytes_in_history", models.BigIntegerField(default=0)),
                ("ingested_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("duration", models.DurationField(blank=True, null=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                ("error_count", models.PositiveIntegerField(default=0)),
                ("importer_version", models.PositiveIntegerField(default=0)),
                (
                    "owner",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="owned_sessions",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("status", models.CharField(blank=True, max_length=100)),
                ("step_count", models.PositiveIntegerField(default=0)),
                ("redaction_count", models.PositiveIntegerField(default=0)),
                ("cost_usd", models.FloatField(blank=True, null=True)),
                ("job", models.CharField(blank=True, max_length=200)),
                ("outcome", models.CharField(blank=True, max_length=10)),
                ("reward", models.FloatField(blank=True, null=True)),
                ("task", models.CharField(blank=True, max_length=300)),
                ("unpriced_turns", models.PositiveIntegerField(default=0)),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
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
                ("folded", models.TextField(null=True)),
            ],
        ),
        migrations.AddField(
            model_name="item",
            name="session",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="items",
                to="blobviewer.session",
            ),
        ),
        migrations.CreateModel(
            name="BlobRef",
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
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="refs",
                        to="blobviewer.blob",
                    ),
                ),
                (
                    "item",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="blob_refs",
                        to="blobviewer.item",
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="blob_refs",
                        to="blobviewer.session",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="ShareLink",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "token",
                    models.CharField(
                        default=blobviewer.models._new_share_token, max_length=64, unique=True
                    ),
                ),
                ("selector", models.CharField(blank=True, max_length=1000)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("expires_at", models.DateTimeField(default=blobviewer.models._default_expiry)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "blob",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="share_links",
                        to="blobviewer.blob",
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="share_links",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("note", models.CharField(blank=True, max_length=500)),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="TraceConversation",
            fields=[
                ("trace_id", models.CharField(max_length=32, primary_key=True, serialize=False)),
                ("key", models.TextField()),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="blobviewer.session",
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["kind"], name="blobviewer__kind_037304_idx"),
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["created_at", "id"], name="blob_created"),
        ),
        migrations.AddIndex(
            model_name="blob",
            index=models.Index(fields=["size", "id"], name="blob_size"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["-created_at"], name="blobviewer__created_613c9f_idx"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["model"], name="blobviewer__model_f33322_idx"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["job", "outcome"], name="blobviewer__job_4220bb_idx"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["task"], name="blobviewer__task_7b507e_idx"),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(
                models.OrderBy(
                    django.db.models.functions.comparison.Coalesce("started_at", "ingested_at"),
                    descending=True,
                ),
                models.OrderBy(models.F("id"), descending=True),
                name="session_started",
            ),
        ),
        migrations.AddIndex(
            model_name="searchchunk",
            index=models.Index(fields=["source", "session"], name="searchchunk_source_session"),
        ),
        migrations.AddConstraint(
            model_name="item",
            constraint=models.UniqueConstraint(fields=("session", "seq"), name="item_unique_seq"),
        ),
        migrations.AddConstraint(
            model_name="blobref",
            constraint=models.UniqueConstraint(
                fields=("item", "blob"), name="blobref_unique_item_blob"
            ),
        ),
        migrations.RunPython(create_search_index, drop_search_index),
        migrations.RunPython(compress_with_lz4, migrations.RunPython.noop),
    ]
