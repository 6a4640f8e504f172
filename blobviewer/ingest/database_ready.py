"""A database ready for ingest: migrated on first use when it is the data directory's own
SQLite file, refused in one line otherwise.

`manage.py ingest` is the first thing a new user runs (the README shows it before any
`migrate`), so on the default SQLite database in the data directory it applies the
migrations itself: that database belongs to this checkout and nobody else migrates it.
A database named by DATABASE_URL (a team's PostgreSQL, or any SQLite file chosen on
purpose) is the operator's to migrate, at a time they choose (`make serve` does it on
start): there ingest refuses before it writes anything, and says which command to run.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.migrations.executor import MigrationExecutor


class DatabaseNotReady(Exception):
    """The database cannot take an ingest yet; str() is one line for the operator."""


def prepare_database(alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """Make sure every migration is applied before ingest writes.

    Returns None when nothing had to be done, or the one line to print when migrations
    were applied to the data directory's own SQLite database. Raises DatabaseNotReady
    (one line naming `manage.py migrate`) when another database has unapplied
    migrations, or when the database cannot be reached at all.
    """
    connection = connections[alias]
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise DatabaseNotReady(
            f"cannot read the database ({describe_database(alias)}): "
            f"{type(error).__name__}: {first_line}"
        ) from None
    if not plan:
        return None
    count = f"{len(plan)} migration{'s' if len(plan) != 1 else ''}"
    if not is_default_sqlite(alias):
        raise DatabaseNotReady(
            f"the database ({describe_database(alias)}) has {count} not applied yet; "
            "run manage.py migrate first (with the same DATABASE_URL)"
        )
    # A fresh data directory (or one from before a `git pull`): ours to bring up to date.
    fresh = not executor.loader.applied_migrations
    call_command("migrate", database=alias, interactive=False, verbosity=0)
    what = "set up the database" if fresh else "brought the database up to date"
    return f"{what} {settings.DATABASES[alias]['NAME']} ({count} applied)"


# The tables an ingest fills, and search reads.
FILLED_TABLES = (
    "blobviewer_session",
    "blobviewer_item",
    "blobviewer_blob",
    "blobviewer_blobref",
    "blobviewer_searchchunk",
)


def refresh_statistics(alias: str = DEFAULT_DB_ALIAS) -> str | None:
    """PostgreSQL: ANALYZE the tables an ingest fills, after it filled them.

    PostgreSQL plans each statement from what it last counted of the tables, and its
    autovacuum counts again only a while after they grew. Until then, search over a
    database that one ingest filled was planned as for the empty tables: PostgreSQL read
    the whole blob table for each session it checked, and took three times as long (a
    common word on 2,000 sessions: 333 ms against 103 ms, docs/benchmarks.md). SQLite
    plans these statements without statistics, as they were written for.

    Returns None, or the one line to print when PostgreSQL would not (a lock it waited
    for too long, say): what the ingest wrote is committed, and autovacuum counts later."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return None
    tables = ", ".join(connection.ops.quote_name(table) for table in FILLED_TABLES)
    try:
        # A savepoint where a transaction is open: a refusal leaves it usable.
        with transaction.atomic(using=alias), connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    except DatabaseError as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return f"ingested, but PostgreSQL did not count the tables for search: {first_line}"
    return None


def is_default_sqlite(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether *alias* is the SQLite file in the data directory that settings use when
    DATABASE_URL is not set (`<BLOBVIEWER_DATA>/db.sqlite3`)."""
    database = settings.DATABASES[alias]
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return False
    default = Path(settings.BLOBVIEWER_DATA) / "db.sqlite3"
    return Path(str(database["NAME"])).resolve() == default.resolve()


def describe_database(alias: str = DEFAULT_DB_ALIAS) -> str:
    """The database in a few words, never with its password: `PostgreSQL "name" at
    host:port`, or `SQLite /path/db.sqlite3`."""
    database = settings.DATABASES[alias]
    engine = str(database["ENGINE"]).rsplit(".", 1)[-1]
    if engine == "sqlite3":
        return f"SQLite {database['NAME']}"
    vendor = {"postgresql": "PostgreSQL", "mysql": "MySQL"}.get(engine, engine)
    where = database.get("HOST") or "localhost"
    if database.get("PORT"):
        where = f"{where}:{database['PORT']}"
    return f'{vendor} "{database["NAME"]}" at {where}'
