"""SQLite's search index without positions.

The FTS5 table kept every trigram's positions in every chunk (`detail=full`), about twice
the size of the text it indexes, and writing them was most of an ingest's indexing time.
Now it keeps only which chunks hold each trigram (`detail=none`), a fraction of that; a
search looks up the chunks that hold all of a query's trigrams and checks each one's
folded text for the query itself (blobviewer.search.queries). PostgreSQL's index is as it
was."""

from django.db import migrations

FTS = "blobviewer_searchchunk_fts"
CHUNKS = "blobviewer_searchchunk"


def _index(detail: str) -> list[str]:
    """The index, its triggers (as migration 0006 made them) and its contents, anew."""
    return [
        f"DROP TRIGGER IF EXISTS {CHUNKS}_au",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ad",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ai",
        f"DROP TABLE IF EXISTS {FTS}",
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, content='{CHUNKS}', content_rowid='id', "
        f"tokenize='trigram case_sensitive 1'{detail})",
        f"CREATE TRIGGER {CHUNKS}_ai AFTER INSERT ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, new.folded); END",
        f"CREATE TRIGGER {CHUNKS}_ad AFTER DELETE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, old.folded); END",
        f"CREATE TRIGGER {CHUNKS}_au AFTER UPDATE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, old.folded); "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, new.folded); END",
        f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
    ]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("blobviewer", "0011_ingested_files")]

    operations = [
        migrations.RunPython(
            _run(_index(", detail=none, columnsize=0")), _run(_index(""))
        )
    ]
