"""A conversation folder (an OpenHands recording: blobviewer.ingest.importers.folder_layout)
as one tar, and back: how a folder recording is kept in an object store
(blobviewer.ingest.kept_recordings) and pushed to a team server (blobviewer.push). Plain
Python, no Django."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path


def folder_tar(folder: Path, transform: Callable[[bytes], bytes] | None = None) -> bytes:
    """The folder as an uncompressed tar under its own name: regular files and folders in
    name order, with fixed times, owners and modes (the same folder, the same bytes);
    each file's bytes through *transform* when given (push redacts them)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [folder, *sorted(folder.rglob("*"))]:
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                continue
            inside = path.relative_to(folder).as_posix()
            info = tarfile.TarInfo(folder.name if path == folder else f"{folder.name}/{inside}")
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            data = path.read_bytes()
            if transform is not None:
                data = transform(data)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack_folder(data: bytes, into: Path, name: str | None = None) -> None:
    """Extract the tar *data* into the folder *into*. Every member is checked before any
    is written: regular files and folders only (no links of any kind, no devices), each
    under one folder (*name* when given), none absolute or reaching up with `..`; then
    tarfile's "data" filter besides. Raises tarfile.TarError (or OSError) for a tar that
    is damaged or breaks those rules."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = tar.getmembers()
        for member in members:
            parts = Path(member.name).parts
            if (
                not (member.isfile() or member.isdir())
                or member.name.startswith(("/", "\\"))
                or not parts
                or ".." in parts
                or (name is not None and parts[0] != name)
            ):
                raise tarfile.TarError(f"{member.name!r}: not a file or folder of the folder")
        tar.extractall(into, members=members, filter="data")
