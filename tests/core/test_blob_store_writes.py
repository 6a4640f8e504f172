"""How FsBlobStore writes a blob's file: small blobs as an unnamed file linked into place
(O_TMPFILE), big ones through a visible `.tmp-` file, and named files wherever the folder
has no unnamed ones. Every way stores the same bytes, atomically, never clobbering."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from core.content import Structured, Text
from core.store import TEMP_PREFIX, FsBlobStore
from core.store.fs import UNNAMED_MAX_BYTES

O_TMPFILE = getattr(os, "O_TMPFILE", 0)
needs_unnamed_files = pytest.mark.skipif(not O_TMPFILE, reason="a system without O_TMPFILE")


class Opens:
    """os.open, counting the files it is asked for: unnamed ones and named temporaries.
    With *refuse_unnamed*, it fails for unnamed ones as a file system without them does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, refuse_unnamed: bool = False):
        self.unnamed = 0
        self.named: list[str] = []
        self._open = os.open
        self._refuse = refuse_unnamed
        monkeypatch.setattr(os, "open", self)

    def __call__(self, path, flags, *args, **kwargs):  # noqa: ANN001, ANN204 - os.open's
        if O_TMPFILE and flags & O_TMPFILE == O_TMPFILE:
            self.unnamed += 1
            if self._refuse:
                raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        elif Path(path).name.startswith(TEMP_PREFIX):
            self.named.append(str(path))
        return self._open(path, flags, *args, **kwargs)


def leftovers(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if path.name.startswith(TEMP_PREFIX)]


@needs_unnamed_files
def test_a_small_blob_never_has_a_temporary_name(tmp_path: Path, monkeypatch) -> None:
    opens = Opens(monkeypatch)
    store = FsBlobStore(tmp_path / "blobs")  # made by the first write
    text_id = store.store_sync(Text("a small output\n" * 50))
    json_id = store.store_sync(Structured({"rows": list(range(100))}))

    assert opens.named == []
    assert opens.unnamed == 3  # the first one twice: once before the folder was made
    assert store.load_sync(text_id) == Text("a small output\n" * 50)
    assert store.load_sync(json_id) == Structured({"rows": list(range(100))})
    assert stat.S_IMODE(store.path_of(text_id).stat().st_mode) == 0o600
    assert leftovers(store.root) == []


@needs_unnamed_files
def test_a_big_blob_is_written_under_a_temporary_name(tmp_path: Path, monkeypatch) -> None:
    opens = Opens(monkeypatch)
    store = FsBlobStore(tmp_path)
    big = Text("x" * UNNAMED_MAX_BYTES + "\n")
    blob_id = store.store_sync(big)

    assert opens.unnamed == 0
    named = [Path(name) for name in opens.named if Path(name).parent == tmp_path]  # not .index/
    assert len(named) == 1 and not named[0].exists()  # renamed into place
    assert store.load_sync(blob_id) == big
    assert leftovers(tmp_path) == []


@needs_unnamed_files
def test_an_existing_blob_is_kept_when_put_again(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "blobs"  # tmp_path also holds the test's own data and temporary folders
    store = FsBlobStore(root)
    blob_id = store.store_sync(Text("the first content\n"))
    opens = Opens(monkeypatch)
    # The existence check passes (the file appears just after it): the link must refuse.
    monkeypatch.setattr(store, "exists_sync", lambda _: False)

    assert store.put_sync(blob_id, Text("other content\n")) is False
    assert opens.unnamed == 1
    assert store.load_sync(blob_id) == Text("the first content\n")
    assert sorted(path.name for path in root.iterdir()) == [f"{blob_id}.txt"]


def test_a_folder_without_unnamed_files_gets_named_ones(tmp_path: Path, monkeypatch) -> None:
    opens = Opens(monkeypatch, refuse_unnamed=True)
    store = FsBlobStore(tmp_path)
    first = store.store_sync(Text("one\n"))
    second = store.store_sync(Text("two\n"))

    assert opens.unnamed == (1 if O_TMPFILE else 0)  # refused once, then not asked again
    assert len(opens.named) == 2
    assert [store.load_sync(first), store.load_sync(second)] == [Text("one\n"), Text("two\n")]
    assert leftovers(tmp_path) == []


@needs_unnamed_files
@pytest.mark.parametrize(
    ("refusal", "unnamed_later"),
    [
        (errno.EPERM, False),  # a sandbox that refuses links through /proc: never again
        (errno.EXDEV, False),
        (errno.ENOENT, True),  # the folder went away meanwhile: this write only
    ],
)
def test_a_refused_link_writes_that_blob_under_a_temporary_name(
    tmp_path: Path, monkeypatch, refusal: int, unnamed_later: bool
) -> None:
    store = FsBlobStore(tmp_path)
    link = os.link

    def refuse_once(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - os.link's
        monkeypatch.setattr(os, "link", link)
        raise OSError(refusal, os.strerror(refusal))

    monkeypatch.setattr(os, "link", refuse_once)
    opens = Opens(monkeypatch)
    first = store.store_sync(Text("first\n"))
    second = store.store_sync(Text("second\n"))

    assert opens.unnamed == (2 if unnamed_later else 1)
    assert len(opens.named) == (1 if unnamed_later else 2)
    assert [store.load_sync(first), store.load_sync(second)] == [Text("first\n"), Text("second\n")]
    assert leftovers(tmp_path) == []
