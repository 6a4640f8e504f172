"""A first ingest just works: on a new data directory `manage.py ingest` sets up its SQLite
database itself (one line says so); a database named by DATABASE_URL that still needs
migrations is refused in one line naming `manage.py migrate`, before anything is written.

Each case runs the command as a user does, in its own process with its own database: an
unmigrated SQLite file always, and a fresh PostgreSQL database too when a server answers at
127.0.0.1:5432 (created here and dropped after).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from blobviewer.ingest.database_ready import prepare_database
from web.ingest_process import REAL, expected_items, item_count, run_ingest

CODEX = REAL / "codex" / "codex_golden.jsonl"
PASSWORD = "not-shown-7f3a"


def postgres_server() -> str | None:
    """A URL to create databases with: the test run's PostgreSQL, else one at
    127.0.0.1:5432 if it answers; None when there is none."""
    url = os.environ.get("DATABASE_URL", "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        parts = urlsplit("postgresql://postgres@127.0.0.1:5432/postgres")
    maintenance = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
    try:
        with psycopg.connect(maintenance, connect_timeout=3):
            return maintenance
    except psycopg.Error:
        return None


SERVER = postgres_server()


@pytest.fixture(params=["sqlite", "postgresql"] if SERVER else ["sqlite"])
def unmigrated_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A DATABASE_URL naming a database nothing has migrated (its URL holds a password
    that must never be shown)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'elsewhere.sqlite3'}"
        return
    assert SERVER is not None
    name = f"blobviewer_first_ingest_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SERVER, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(SERVER)
    user = parts.username or "postgres"
    netloc = f"{user}:{PASSWORD}@{parts.hostname}:{parts.port or 5432}"
    try:
        yield urlunsplit(parts._replace(netloc=netloc, path=f"/{name}"))
    finally:
        with psycopg.connect(SERVER, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def database_tables(url: str) -> list[str]:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        assert path.exists()  # the command opened it, and wrote nothing into it
        with closing(sqlite3.connect(path)) as connection:
            rows = connection.execute("SELECT name FROM sqlite_master").fetchall()
        return [row[0] for row in rows]
    connect = urlunsplit(urlsplit(url)._replace(scheme="postgresql"))
    with psycopg.connect(connect) as connection:
        rows = connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return [row[0] for row in rows]


def test_a_first_ingest_on_a_new_data_directory_sets_up_its_database(tmp_path: Path) -> None:
    data = tmp_path / "new-data"  # not even the directory exists

    first = run_ingest(CODEX, data=data)

    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    lines = first.stdout.splitlines()
    assert lines[0].startswith(f"set up the database {data / 'db.sqlite3'} (")
    assert lines[0].endswith(" migrations applied)")
    assert lines[1].startswith(f"[1/1] {CODEX}: +7 items (7 in all)")
    session_id, items = expected_items(CODEX)
    assert item_count(data, session_id) == items

    again = run_ingest(CODEX, data=data)

    assert again.returncode == 0, again.stderr
    # Not even read: its mark from the first run says it has not changed.
    assert again.stdout.splitlines()[0] == f"[1/1] {CODEX}: unchanged since its last ingest"
    assert "database" not in again.stdout


def test_it_refuses_an_unmigrated_database_url_database_in_one_line(
    tmp_path: Path, unmigrated_database: str
) -> None:
    data = tmp_path / "data"

    result = run_ingest(CODEX, data=data, DATABASE_URL=unmigrated_database)

    assert result.returncode == 1
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("CommandError: the database (")
    assert " migrations not applied yet; run manage.py migrate first" in line
    assert PASSWORD not in line
    # Nothing was written: no table, no data directory's database.
    assert database_tables(unmigrated_database) == []
    assert not (data / "db.sqlite3").exists()


def test_it_refuses_in_one_line_a_database_it_cannot_reach(tmp_path: Path) -> None:
    # Port 9 (discard) on loopback: nothing listens there.
    url = f"postgres://blobviewer:{PASSWORD}@127.0.0.1:9/blobviewer"

    result = run_ingest(CODEX, data=tmp_path / "data", DATABASE_URL=url)

    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        'CommandError: cannot read the database (PostgreSQL "blobviewer" at 127.0.0.1:9): '
        "OperationalError: "
    )
    assert PASSWORD not in line
    assert "Traceback" not in result.stderr


@pytest.mark.django_db
def test_a_migrated_database_is_left_as_it_is() -> None:
    assert prepare_database() is None
