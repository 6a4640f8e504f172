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


def unpack_folder(data: bytes, into: Path) -> None:
    """Extract the tar *data* into the folder *into*: nothing outside it, no links out, no
    devices, plain modes (tarfile's "data" filter). Raises tarfile.TarError (or OSError)
    for a tar that is damaged or breaks those rules."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        tar.extractall(into, filter="data")
