"""PostgreSQL: the long text columns that ingest and search indexing write are compressed
with lz4 instead of pglz, where the server has it (PostgreSQL 14 or later, built with
lz4). Compressing long values with pglz took about a twelfth of the server's work in an
ingest (docs/benchmarks.md#ingest); lz4 does it several times faster, and reads back
faster too. Values stored before keep their compression until they are written again.
Nothing changes on SQLite, or on a server without lz4."""

from django.db import migrations

# (table, column): the columns that hold values long enough to be compressed.
COLUMNS = [
    ("blobviewer_item", "text"),
    ("blobviewer_item", "output"),
    ("blobviewer_item", "tool_calls"),
    ("blobviewer_searchchunk", "text"),
    ("blobviewer_searchchunk", "folded"),
]


def _server_has_lz4(schema_editor) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
            " WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def _set_compression(method: str):
    def run(apps, schema_editor) -> None:
        if not _server_has_lz4(schema_editor):
            return
        quote = schema_editor.quote_name
        for table, column in COLUMNS:
            schema_editor.execute(
                f"ALTER TABLE {quote(table)} ALTER COLUMN {quote(column)} SET COMPRESSION {method}"
            )

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("blobviewer", "0009_fewer_indexes"),
    ]

    operations = [
        migrations.RunPython(_set_compression("lz4"), _set_compression("default")),
    ]
