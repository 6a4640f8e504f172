"""Every test in a folder of its own: its data folder and its temporary folder.

A test that forgets the `data_dir` fixture, or a subprocess that makes a temporary folder,
must not write into the developer's `./data` or leave `blobviewer-*` entries in the system's
temporary folder. Each test gets `BLOBVIEWER_DATA` and `TMPDIR` under its own `tmp_path`
(for this process and the processes it starts), and the run fails when `./data` or the
system temporary folder changed anyway.

Loaded by tests/conftest.py (`pytest_plugins`); an inner pytest run loads it with `-p`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUARDED_DATA = REPO / "data"
SYSTEM_TMP = Path(tempfile.gettempdir())  # read before any test moves TMPDIR
TEMP_PREFIX = "blobviewer-"

_guard = pytest.StashKey[tuple[dict[str, tuple[int, int]], set[str]]]()


def data_files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under *root* with its size and modification time (none when it is absent)."""
    found: dict[str, tuple[int, int]] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed while we walked
                continue
            found[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return found


def our_temp_entries() -> set[str]:
    return {name for name in os.listdir(SYSTEM_TMP) if name.startswith(TEMP_PREFIX)}


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_xdist_worker(session.config):  # the controller watches for the whole run
        session.config.stash[_guard] = (data_files(GUARDED_DATA), our_temp_entries())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _guard not in session.config.stash:
        return
    data_before, temp_before = session.config.stash[_guard]
    data_after = data_files(GUARDED_DATA)
    changed = sorted(
        name
        for name in data_before.keys() | data_after.keys()
        if data_before.get(name) != data_after.get(name)
    )
    leftovers = sorted(our_temp_entries() - temp_before)
    problems = []
    if changed:
        shown = ", ".join(changed[:10]) + (" …" if len(changed) > 10 else "")
        problems.append(f"the run changed {GUARDED_DATA}: {shown}")
    if leftovers:
        problems.append(f"the run left {', '.join(leftovers)} in {SYSTEM_TMP}")
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for problem in problems:
            if reporter is not None:
                reporter.write_line(f"ISOLATION FAILED: {problem}", red=True, bold=True)
            else:
                print(f"ISOLATION FAILED: {problem}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def own_folders(tmp_path: Path) -> Iterator[Path]:
    """This test's data folder (settings.BLOBVIEWER_DATA and the environment's) and its
    temporary folder (TMPDIR, for subprocesses too, and tempfile's). A patcher of its own,
    so that a test's `monkeypatch.undo()` cannot put ./data back."""
    data = tmp_path / "data"
    temp = tmp_path / "tmp"
    data.mkdir(exist_ok=True)
    temp.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BLOBVIEWER_DATA", str(data))
        patch.setenv("TMPDIR", str(temp))
        patch.setattr(tempfile, "tempdir", str(temp))
        if "django.conf" in sys.modules:
            from django.conf import settings

            if settings.configured:
                patch.setattr(settings, "BLOBVIEWER_DATA", data)
        yield data
