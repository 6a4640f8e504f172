"""Temporary files that crashed writers leave in the data folder, and removing old ones.

Every writer of the data folder writes a temporary file first and renames it into place
when it is complete, so a process killed mid-write (kill -9, the OOM killer, a power
loss) leaves its temporary file behind and nothing else. Each kind is known by its name
and its folder:

- `blobs/.tmp-*`: FsBlobStore writes (core.store.TEMP_PREFIX): agents, `python -m
  core store`, ingest's promoted outputs, uploaded blobs;
- `derived/.tmp-*`: the indented renderings of big JSON blobs (an FsBlobStore too);
- in both, `.index/.tmp-*`: indexes of blobs and renderings (core.store.index), written when a
  blob is stored or first read; counted with their folder's own;
- `sessions/.upload-*.part`: an uploaded session log while it is checked and ingested
  (blobviewer.team.uploads);
- `.tmp-*` in the data folder itself: the marker `manage.py blobs index` writes.

With an object store (settings.BLOBVIEWER_BLOBS) objects are written whole or not at all,
so nothing half written is ever visible there; what a killed writer leaves is a multipart
upload never completed (a big blob, rendering or log: parts kept by the server, listed by
no listing of objects). :func:`abort_stale_uploads` aborts those older than the cut-off,
which frees their parts. The local folders are still cleaned as above (uploads are
received on the host's disk first).

Only files older than a cut-off go: a younger one may belong to a write still going on (a
writer's file is modified as it is written; only a dead writer's file grows old). Real
blobs (`<uuid>.txt`, `<uuid>.json`), session logs and anything else never match.

The blobs an ingest stored before it was killed, ahead of the transaction that was to
reference them, are real blobs: no name tells them apart, their ingest's journal does.
`blobs gc` settles those journals too (blobviewer.ingest.journal: this room is below
ingest, so the command calls both).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from core.store import TEMP_PREFIX, BlobIOError, BlobStore
from core.store.index import INDEX_FOLDER
from core.store.s3 import S3BlobStore  # boto3 only when an object store is used

DEFAULT_AGE = timedelta(hours=1)


def _store_temp(name: str) -> bool:
    return name.startswith(TEMP_PREFIX)


def _upload_temp(name: str) -> bool:
    # tempfile.mkstemp(prefix=".upload-", suffix=".part") in session_upload.received_upload
    return name.startswith(".upload-") and name.endswith(".part")


# (folder inside the data folder, "" for the data folder itself; which names are temporary)
TEMPORARY_FILES: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("blobs", _store_temp),
    ("derived", _store_temp),
    ("sessions", _upload_temp),
    ("", _store_temp),
)


@dataclass
class FolderReport:
    """What gc found in one folder: *removed* files of *removed_bytes* in all, and
    *kept_young* temporary files not old enough to be a dead writer's."""

    folder: str
    removed: int = 0
    removed_bytes: int = 0
    kept_young: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GcReport:
    folders: list[FolderReport]

    @property
    def removed(self) -> int:
        return sum(folder.removed for folder in self.folders)

    @property
    def removed_bytes(self) -> int:
        return sum(folder.removed_bytes for folder in self.folders)

    @property
    def kept_young(self) -> int:
        return sum(folder.kept_young for folder in self.folders)

    @property
    def failures(self) -> list[str]:
        return [failure for folder in self.folders for failure in folder.failures]


def remove_leftovers(
    data: Path, *, older_than: timedelta = DEFAULT_AGE, dry_run: bool = False
) -> GcReport:
    """Remove the temporary files in the data folder *data* last modified more than
    *older_than* ago (with *dry_run*, only count them). Never raises for one file: a file
    that cannot be removed is listed in the report's failures."""
    cutoff = time.time() - older_than.total_seconds()
    return GcReport(
        [
            _collect(_folders(data, folder), folder, is_temp, cutoff, dry_run)
            for folder, is_temp in TEMPORARY_FILES
        ]
    )


def _folders(data: Path, folder: str) -> list[Path]:
    """Where *folder*'s temporary files are: in it, and for a store, in its `.index/`."""
    if not folder:
        return [data]
    if folder in ("blobs", "derived"):
        return [data / folder, data / folder / INDEX_FOLDER]
    return [data / folder]


def _collect(
    directories: list[Path],
    folder: str,
    is_temp: Callable[[str], bool],
    cutoff: float,
    dry_run: bool,
) -> FolderReport:
    report = FolderReport(f"{folder}/" if folder else "./")
    entries = []
    for directory in directories:
        try:
            entries += list(os.scandir(directory))
        except FileNotFoundError:
            continue
        except OSError as error:
            report.failures.append(f"cannot list {directory}: {error.strerror}")
    for entry in entries:
        if not is_temp(entry.name):
            continue
        try:
            # Never through a symlink, never a folder: only a writer's own file.
            if not entry.is_file(follow_symlinks=False):
                continue
            stat = entry.stat(follow_symlinks=False)
            if stat.st_mtime >= cutoff:
                report.kept_young += 1
                continue
            if not dry_run:
                os.unlink(entry.path)
        except FileNotFoundError:  # its writer finished (renamed it) or removed it meanwhile
            continue
        except OSError as error:
            report.failures.append(f"cannot remove {entry.path}: {error.strerror}")
            continue
        report.removed += 1
        report.removed_bytes += stat.st_size
    return report


def abort_stale_uploads(store: BlobStore, *, older_than: timedelta, dry_run: bool = False) -> int:
    """Abort the multipart uploads under the object store's prefix (blobs, `derived/`,
    `sessions/`) started more than *older_than* ago; how many (with *dry_run*, how many
    would be). 0 for a store that is no object store. Raises BlobStoreError."""
    if not isinstance(store, S3BlobStore):
        return 0
    if not dry_run:
        return store.objects_root.abort_uploads(older_than=older_than.total_seconds())
    objects = store.objects_root
    prefix = f"{objects.prefix}/" if objects.prefix else ""
    cutoff = time.time() - older_than.total_seconds()
    stale = 0
    try:
        pages = objects.client.get_paginator("list_multipart_uploads")
        for page in pages.paginate(Bucket=objects.bucket, Prefix=prefix):
            for upload in page.get("Uploads", ()):
                started = upload.get("Initiated")
                stale += started is None or started.timestamp() < cutoff
    except Exception as error:  # botocore's errors: boto3 is not imported here
        raise BlobIOError(f"cannot list the uploads of {objects.url}: {error}") from None
    return stale


_AGE = re.compile(r"(?P<number>\d{1,9})\s*(?P<unit>[smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_leftover_age(text: str) -> timedelta:
    """`90s`, `30m`, `2h`, `7d` as a timedelta; raises ValueError with a one-line message
    for anything else, or for zero (every temporary file, even one being written now)."""
    match = _AGE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(
            f"expected a number and a unit (s, m, h or d), e.g. 30m, 2h or 7d; got {text!r}"
        )
    age = timedelta(**{_UNITS[match["unit"]]: int(match["number"])})
    if not age:
        raise ValueError("must be more than 0: a younger file may be a write still going on")
    return age


def format_age(age: timedelta) -> str:
    """The shortest of `2h`, `30m`, `90s`, `7d` that says *age* exactly."""
    seconds = int(age.total_seconds())
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
