"""`manage.py ingest` as its own process, on a data directory of its own, for the tests of
first use, watching and agents' folders: what a user types, with the database the command
itself finds (or makes) and never the test run's."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers import load_recording

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "real"
# The test run's settings must not reach the command: it finds its own database.
LEAKY = ("DATABASE_URL", "DJANGO_", "BLOBVIEWER_", "DEBUG", "SECRET_KEY", "WATCHFILES_")
# Only to give up on a process that hangs, instead of hanging the run: a first start
# migrates a new database, slow on a busy machine. Never a measure of speed.
START_BOUND_SECONDS = 180
# How long a change may take to reach the database while watching (the brief's bound).
CHANGE_BOUND_SECONDS = 15


def command_env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEAKY)}
    env["BLOBVIEWER_DATA"] = str(data)
    env.update(extra)
    return env


def run_ingest(*args: str | Path, data: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """`manage.py ingest ARGS` to completion, its output captured."""
    return subprocess.run(
        [sys.executable, "manage.py", "ingest", *map(str, args)],
        cwd=ROOT,
        env=command_env(data, **extra),
        capture_output=True,
        text=True,
        timeout=START_BOUND_SECONDS,
        check=False,
    )


class Watching:
    """`manage.py ingest --watch ...` running in the background, its stdout and stderr
    going to files the test reads as they grow."""

    def __init__(self, args: list[str | Path], *, data: Path, logs: Path, **extra: str) -> None:
        logs.mkdir(parents=True, exist_ok=True)
        self.out_path = logs / "stdout.txt"
        self.err_path = logs / "stderr.txt"
        self.data = data
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "ingest", "--watch", *map(str, args)],
                cwd=ROOT,
                env=command_env(data, **extra),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for_output(self, text: str, bound: float = CHANGE_BOUND_SECONDS) -> None:
        wait_until(lambda: text in self.out(), bound, f"{text!r} in the output", self)

    def items(self, session_id: uuid.UUID) -> int:
        return item_count(self.data, session_id)

    def wait_for_items(
        self, session_id: uuid.UUID, count: int, bound: float = CHANGE_BOUND_SECONDS
    ) -> None:
        wait_until(
            lambda: self.items(session_id) == count,
            bound,
            f"{count} items in session {session_id} (have {self.items(session_id)})",
            self,
        )

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as a service manager stops it; the exit code."""
        self.process.terminate()
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def wait_until(
    condition: Callable[[], bool], bound: float, what: str, watching: Watching | None = None
) -> None:
    """Poll *condition* until it holds; fail naming *what* once *bound* seconds passed (a
    bound on a hang, never a speed assertion)."""
    deadline = time.monotonic() + bound
    while not condition():
        if watching is not None and watching.process.poll() is not None:
            raise AssertionError(
                f"ingest --watch exited with {watching.process.returncode} waiting for "
                f"{what}:\n{watching.out()[-3000:]}\n{watching.err()[-3000:]}"
            )
        if time.monotonic() > deadline:
            detail = f"\n{watching.out()[-3000:]}\n{watching.err()[-3000:]}" if watching else ""
            raise AssertionError(f"no {what} after {bound:.0f}s{detail}")
        time.sleep(0.1)


def item_count(data: Path, session_id: uuid.UUID) -> int:
    """The items of *session_id* in the data directory's SQLite database (the command's,
    read directly: 0 while the database or its tables do not exist yet)."""
    rows = query(data, "SELECT COUNT(*) FROM blobviewer_item WHERE session_id = ?", session_id.hex)
    return int(rows[0][0]) if rows else 0


def query(data: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    database = data / "db.sqlite3"
    if not database.exists():
        return []
    try:
        with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)) as db:
            return db.execute(sql, params).fetchall()
    except sqlite3.OperationalError:  # not migrated yet, or busy: not there yet
        return []


def expected_items(path: Path) -> tuple[uuid.UUID, int]:
    """The session id and item count an importer derives from *path* as it is now (the
    importer alone, no database): what ingest must have recorded, no more, no less."""
    recording = load_recording(path)
    return uuid.UUID(recording.header["id"]), len(recording.records)
