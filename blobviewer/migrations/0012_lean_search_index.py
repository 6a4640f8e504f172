"""SQLite's search index without a folded copy of the text, and without positions.

The FTS5 table read each chunk's `folded` column, a second copy of its text, and kept
every trigram's positions (`detail=full`), about twice the text again. Now its triggers
fold the text as they index it (the `casefold()` SQL function that
blobviewer.search.folding adds to every connection), its content is a view that folds the
same way, and it keeps only which chunks hold each trigram (`detail=none`): a search
checks the candidates against the text (blobviewer.search.queries). The `folded` column
stays, empty on SQLite; PostgreSQL's index and column are as they were."""

from django.db import migrations

FTS = "blobviewer_searchchunk_fts"
CHUNKS = "blobviewer_searchchunk"
FOLDED = "blobviewer_searchchunk_folded"


def _triggers(folded_of: str) -> list[str]:
    """The triggers that keep the index in step with the chunks; *folded_of* is the SQL
    for a row's folded text, with ROW where `new` or `old` goes."""
    new, old = folded_of.replace("ROW", "new"), folded_of.replace("ROW", "old")
    return [
        f"CREATE TRIGGER {CHUNKS}_ai AFTER INSERT ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
        f"CREATE TRIGGER {CHUNKS}_ad AFTER DELETE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER {CHUNKS}_au AFTER UPDATE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
    ]


_DROP = [
    f"DROP TRIGGER IF EXISTS {CHUNKS}_au",
    f"DROP TRIGGER IF EXISTS {CHUNKS}_ad",
    f"DROP TRIGGER IF EXISTS {CHUNKS}_ai",
    f"DROP TABLE IF EXISTS {FTS}",
]
FORWARD = [
    *_DROP,
    f"UPDATE {CHUNKS} SET folded = ''",
    f"CREATE VIEW {FOLDED} AS SELECT id, casefold(text) AS folded FROM {CHUNKS}",
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, content='{FOLDED}', content_rowid='id', "
    "tokenize='trigram case_sensitive 1', detail=none, columnsize=0)",
    *_triggers("casefold(ROW.text)"),
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
BACKWARD = [
    *_DROP,
    f"DROP VIEW IF EXISTS {FOLDED}",
    f"UPDATE {CHUNKS} SET folded = casefold(text)",
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, content='{CHUNKS}', content_rowid='id', "
    "tokenize='trigram case_sensitive 1')",
    *_triggers("ROW.folded"),
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

    operations = [migrations.RunPython(_run(FORWARD), _run(BACKWARD))]
