"""The suite's isolation (tests/isolation.py): a test that writes into the developer's
./data, or leaves a blobviewer-* entry in the system's temporary folder, fails the run."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from isolation import GUARDED_DATA, REPO, SYSTEM_TMP

# One worker runs these one after the other: an inner run watches ./data and the system's
# temporary folder, where another of these tests plants a file on purpose.
pytestmark = pytest.mark.xdist_group("isolation")

INNER = """
import os, tempfile
from pathlib import Path

def test_it_writes(request):
    Path({target!r}).parent.mkdir(parents=True, exist_ok=True)
    {write}
"""


@pytest.fixture
def inner_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Runs one inner test file in a pytest subprocess with the isolation plugin."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "tests"))
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
    monkeypatch.setenv("TMPDIR", str(SYSTEM_TMP))  # the inner run watches the real one

    def run(target: Path, write: str) -> pytest.RunResult:
        pytester.makepyfile(test_inner=INNER.format(target=str(target), write=write))
        return pytester.runpytest_subprocess("-p", "isolation", "-p", "no:django", "-p", "no:xdist")

    yield run


@pytest.fixture
def in_repo_data() -> Iterator[Path]:
    """A file name in the repository's ./data that nothing else uses, removed afterwards
    (with ./data itself when this test made it)."""
    made_folder = not GUARDED_DATA.exists()
    target = GUARDED_DATA / f"isolation-check-{uuid.uuid4().hex}.txt"
    yield target
    target.unlink(missing_ok=True)
    if made_folder and GUARDED_DATA.exists() and not any(GUARDED_DATA.iterdir()):
        GUARDED_DATA.rmdir()


def test_a_test_that_writes_into_dot_data_fails_the_run(inner_run, in_repo_data: Path) -> None:
    result = inner_run(in_repo_data, f"Path({str(in_repo_data)!r}).write_text('leak')")

    result.stdout.fnmatch_lines(["*1 passed*"])  # the inner test itself passed...
    assert "ISOLATION FAILED: the run changed" in result.stdout.str()
    assert in_repo_data.name in result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # ...and the run failed


def test_a_blobviewer_entry_left_in_the_system_temp_folder_fails_the_run(inner_run) -> None:
    leftover = SYSTEM_TMP / f"blobviewer-isolation-check-{uuid.uuid4().hex}"
    try:
        result = inner_run(leftover, f"Path({str(leftover)!r}).mkdir()")

        assert f"ISOLATION FAILED: the run left {leftover.name}" in result.stdout.str()
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    finally:
        shutil.rmtree(leftover, ignore_errors=True)


def test_a_test_that_uses_its_own_folders_passes(inner_run, tmp_path: Path) -> None:
    # The data folder and TMPDIR the plugin gives the inner test: writing there is fine.
    write = (
        "Path(os.environ['BLOBVIEWER_DATA'], 'db.sqlite3').write_text('ok'); "
        "tempfile.mkdtemp(prefix='blobviewer-mcp-')"
    )
    result = inner_run(tmp_path / "unused" / "x", write)

    assert "ISOLATION FAILED" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.OK


def test_each_test_has_its_own_data_and_temporary_folders(own_folders: Path, tmp_path: Path):
    import os
    import tempfile

    assert own_folders == tmp_path / "data"
    assert Path(os.environ["BLOBVIEWER_DATA"]) == own_folders
    assert Path(tempfile.mkdtemp(prefix="blobviewer-")).parent == tmp_path / "tmp"
