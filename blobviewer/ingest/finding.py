"""Which files are recordings: files given, and folders searched for recording-like names,
their symbolic links followed or not (docs/recording.md#symbolic-links). Plain Python: no
Django here, so that an ingest with nothing to do can tell before Django starts
(blobviewer.ingest.quick_check)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from blobviewer.ingest.importers import FOLDER_MARKERS, folder_layout

RECORDING_SUFFIXES = (".jsonl", ".json", ".traj")


class Links:
    """Which symbolic links ingest follows in the folders it searches
    (docs/recording.md#symbolic-links): a link that leads inside the *folders* given (both
    resolved before they are compared) is followed, one that leads out of them only when
    *follow* (`--follow-links`). A link not followed is remembered, to be said once
    (unsaid). Deciding never opens the link's target: links are read, not followed
    (readlink and lstat, as Path.resolve does). A path named on the command line is not
    judged here: the user named it."""

    def __init__(self, folders: Iterable[Path], *, follow: bool = False) -> None:
        self.follow = follow
        self._roots = [folder.resolve() for folder in folders if folder.is_dir()]
        self._passed_over: dict[Path, Path] = {}  # link -> where it leads
        self._said: set[Path] = set()

    def inside(self, target: Path) -> bool:
        """Whether *target* (a resolved path) is one of the folders or in one."""
        return any(target == root or root in target.parents for root in self._roots)

    def allows(self, path: Path) -> bool:
        """Whether *path*, found in a folder searched or watched, may be read: it leads
        inside the folders, or links are followed. One that leads out is remembered with
        the link it goes through (itself, or the linked folder it is in), to be said when
        that link could be a recording or hold some (a folder, or a recording's name)."""
        if self.follow:
            return True
        target = path.resolve()
        if self.inside(target):
            return True
        link = next((part for part in (path, *path.parents) if part.is_symlink()), path)
        if link.suffix in RECORDING_SUFFIXES or link.is_dir():
            self._passed_over.setdefault(link, link.resolve())
        return False

    def unsaid_any(self) -> bool:
        """Whether a link not followed has yet to be said."""
        return not self._said.issuperset(self._passed_over)

    def unsaid(self) -> list[str]:
        """A line for each link not followed that has not been said yet."""
        lines = []
        for link, target in self._passed_over.items():
            if link not in self._said:
                self._said.add(link)
                lines.append(
                    f"{link}: a link to {target}, outside the folders given; not followed "
                    "(--follow-links follows it)"
                )
        return lines


def recording_paths(
    paths: Iterable[Path], *, links: Links | None = None
) -> list[tuple[Path, bool]]:
    """(path, named) pairs: files as given (named), and the files of folders, searched
    recursively for recording-like names, in name order. Hidden entries and blob stores
    (folders named `blobs`, whose `.json` files are blobs, not recordings) are passed over.
    A conversation folder (OpenHands: see blobviewer.ingest.importers.folder_layout) is one
    recording, given or found, and the files inside it are not searched. A symbolic link
    found in a folder is followed as *links* says (default: only inside *paths*).
    """
    paths = list(paths)
    links = Links(paths) if links is None else links
    found: list[tuple[Path, bool]] = []
    for path in paths:
        if not path.is_dir() or folder_layout(path) is not None:
            found.append((path, True))
            continue
        candidates = _search(path, links)
        # Recognised by what is in them (an events/ folder and its first event or state;
        # an agent/ folder beside a trial's result or config).
        folders = {
            c.parent for c in candidates if c.name in FOLDER_MARKERS and folder_layout(c.parent)
        }
        for candidate in candidates:
            if folders and not folders.isdisjoint(candidate.parents):
                continue  # inside a conversation folder: part of that recording
            if never_a_recording(candidate.relative_to(path).parts):
                continue
            # Only a link can lead out: the search enters no linked folder unless told to.
            if candidate.is_symlink() and not links.allows(candidate):
                continue
            if candidate in folders or (
                candidate.suffix in RECORDING_SUFFIXES and candidate.is_file()
            ):
                found.append((candidate, False))
    return found


def _search(folder: Path, links: Links) -> list[Path]:
    """Every file and folder under *folder*, in name order, as `rglob("*")` lists them:
    a linked folder is listed but not entered, unless links are followed and it leads out
    of the folders given (then once, however many links lead to it)."""
    found: list[Path] = []
    pending = [folder]
    entered = {folder.resolve()}
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue  # unreadable: searched as far as it can be, as rglob does
        for entry in entries:
            path = current / entry.name
            found.append(path)
            try:
                if not entry.is_dir():
                    continue
                if not entry.is_symlink():
                    pending.append(path)
                    continue
            except OSError:
                continue
            target = path.resolve() if links.follow else None
            if target is not None and not links.inside(target) and target not in entered:
                entered.add(target)
                pending.append(path)
    return sorted(found)


def never_a_recording(parts: tuple[str, ...]) -> bool:
    """Whether a path found in a folder (*parts*, relative to it) is passed over: hidden,
    or in a hidden folder or a blob store (`blobs/`, whose `.json` files are blobs)."""
    *folders, name = parts
    return name.startswith(".") or any(part.startswith(".") or part == "blobs" for part in folders)
