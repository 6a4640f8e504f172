"""The search index keeps a chunk's folded copy only where the database cannot make it.

Every chunk kept its text twice, as written and folded (blobviewer.search.folding), and
for most text, all of it ASCII, the folded copy is the text with its capitals lowered,
which both databases do themselves. `folded` is now NULL for those chunks and search
reads `COALESCE(folded, lower(text))` (PostgreSQL: lower under the "C" collation, which
lowers ASCII only, as SQLite's does): about half the index's size. SQLite's FTS5 table
becomes contentless, fed that expression by the triggers; PostgreSQL's trigram index is
on the expression."""

from django.db import migrations, models

FTS = "blobviewer_searchchunk_fts"
CHUNKS = "blobviewer_searchchunk"


def _sqlite_index(searched: str, content: str) -> list[str]:
    """SQLite's FTS5 table, its triggers and its contents, anew, indexing *searched* (an
    expression over a chunk's columns, each written `{row}name`)."""
    old, new, row = (searched.format(row=prefix) for prefix in ("old.", "new.", ""))
    return [
        f"DROP TRIGGER IF EXISTS {CHUNKS}_au",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ad",
        f"DROP TRIGGER IF EXISTS {CHUNKS}_ai",
        f"DROP TABLE IF EXISTS {FTS}",
        f"CREATE VIRTUAL TABLE {FTS} USING fts5(folded, {content}, "
        "tokenize='trigram case_sensitive 1', detail=none, columnsize=0)",
        f"CREATE TRIGGER {CHUNKS}_ai AFTER INSERT ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
        f"CREATE TRIGGER {CHUNKS}_ad AFTER DELETE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER {CHUNKS}_au AFTER UPDATE ON {CHUNKS} BEGIN "
        f"INSERT INTO {FTS}({FTS}, rowid, folded) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO {FTS}(rowid, folded) VALUES (new.id, {new}); END",
        f"INSERT INTO {FTS}(rowid, folded) SELECT id, {row} FROM {CHUNKS}",
    ]


POSTGRES_SEARCHED = 'COALESCE(folded, lower(text COLLATE "C"))'

FORWARD = {
    "sqlite": [
        f"UPDATE {CHUNKS} SET folded = NULL WHERE folded = lower(text)",
        *_sqlite_index("COALESCE({row}folded, lower({row}text))", "content=''"),
    ],
    "postgresql": [
        f"UPDATE {CHUNKS} SET folded = NULL WHERE folded = lower(text COLLATE \"C\")",
        "DROP INDEX IF EXISTS searchchunk_folded_trgm",
        f"CREATE INDEX searchchunk_searched_trgm ON {CHUNKS} "
        f"USING gin (({POSTGRES_SEARCHED}) gin_trgm_ops)",
    ],
}
BACKWARD = {
    "sqlite": [
        f"UPDATE {CHUNKS} SET folded = lower(text) WHERE folded IS NULL",
        *_sqlite_index("{row}folded", f"content='{CHUNKS}', content_rowid='id'"),
    ],
    "postgresql": [
        "DROP INDEX IF EXISTS searchchunk_searched_trgm",
        f"UPDATE {CHUNKS} SET folded = lower(text COLLATE \"C\") WHERE folded IS NULL",
        f"CREATE INDEX searchchunk_folded_trgm ON {CHUNKS} USING gin (folded gin_trgm_ops)",
    ],
}


def _run(statements):
    def run(apps, schema_editor):
        for statement in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("blobviewer", "0012_lean_search_index")]

    operations = [
        migrations.AlterField(
            model_name="searchchunk", name="folded", field=models.TextField(null=True)
        ),
        migrations.RunPython(_run(FORWARD), _run(BACKWARD)),
    ]
