"""Recordings that `blobviewer push` sends from other machines (`POST /api/recordings`,
docs/http-api.md#post-apirecordings).

A pushed recording is a file of any format `manage.py ingest` reads, sent as it is (its
secrets redacted by the sender: `blobviewer push` redacts each line before it sends it).
The site holds a copy of it per user and per *key* (the sender's name for the file, e.g.
`laptop:/home/ana/.claude/projects/x/y.jsonl`): `<data>/pushed/<user>/<digest of the
key>/<name>`. Offsets are the sender's, in its own file: a push names the offset it sends
from and the digest of the sender's bytes before it (blobviewer.ingest.marks.prefix_digest,
as ingest marks grown files), and the offset and digest its bytes end at; the site keeps
the last of these beside the copy (`.held.json`: the copy's own bytes may differ from
the sender's, redacted). The copy grows by what is sent when offset and digest match
what the site holds, and is replaced when the sender asks (`replace=1`, from offset 0).
Otherwise the answer is 409 with the offset the site holds (0 when the bytes before it
differ: send it whole), and the client sends from there. The last part of a push (`final`,
the default) is then ingested exactly as `manage.py ingest` ingests a file, for the token's
user: a grown JSON Lines recording is read from where its last ingest ended.

Sessions of a pushed recording belong to the user who first sent them, and only that user
may add to them (a session owned by nobody is refused too, as uploads refuse it). A push
that no session took (refused, or not a recording) leaves the copy as it was.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

from blobviewer.catalog.session_logs import kept_recordings
from blobviewer.data_dir import blob_store, data_dir
from blobviewer.ingest.errors import (
    IngestError,
    NotARecording,
    NotTheirs,
    OutdatedSession,
    SessionPruned,
)
from blobviewer.ingest.folder_tars import unpack_folder
from blobviewer.ingest.importers.json_lines import SkippedRecord
from blobviewer.ingest.marks import prefix_digest
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.recording_run import IngestRun
from blobviewer.ingest.sessions import IngestResult
from blobviewer.team.uploads import (
    UploadError,
    client_message,
    content_length,
    copy_body,
    too_big,
)

# The header every answer to a push gives the offset the site holds in.
HELD_OFFSET = "Blobviewer-Offset"
# The status of a push of a file that is no recording (the client passes it over, as
# ingest passes over such a file found in a folder).
NOT_A_RECORDING = 422
_KEY_CHARS = 2000
# Room for the copy's own names beside it (`.<name>.before`) within a file name's 255 bytes.
_NAME_BYTES = 200


@dataclass(frozen=True)
class Push:
    """What a push says of itself (its query string): the recording's *key* and file
    *name*, the *offset* its bytes go at, the *prefix* digest of the sender's bytes before
    that offset, and whether it is the *final* part (then it is ingested)."""

    key: str
    name: str
    offset: int
    prefix: str
    final: bool
    # Where the sent bytes end in the sender's file, and the digest of its bytes up to
    # there; None: the bytes were sent as they are in the file (curl), end where they end.
    end: int | None = None
    end_prefix: str = ""
    # A conversation folder, sent whole as a tar of its files (folder_tars.folder_tar).
    folder: bool = False
    # From offset 0: replace whatever is held (a file sent whole, or one that changed
    # before what the site holds), rather than be told where the site stands.
    replace: bool = False

    @classmethod
    def of(cls, request: HttpRequest) -> Push:
        """The push *request* makes; raises UploadError (400) for a bad parameter."""
        query = request.GET
        key, name = query.get("key", ""), query.get("name", "")
        if not key or len(key) > _KEY_CHARS or "\x00" in key:
            raise UploadError(
                "key: give the recording's name on the sending machine "
                f"(at most {_KEY_CHARS} characters)"
            )
        if (
            not name
            or len(name.encode("utf-8", "surrogatepass")) > _NAME_BYTES
            or name in (".", "..")
            or name.startswith(".")
            or any(char in name for char in "/\\\x00")
        ):
            raise UploadError("name: give the recording's file name, without a folder")
        try:
            offset = int(query.get("offset", "0"))
        except ValueError:
            offset = -1
        if offset < 0:
            raise UploadError("offset: a number of bytes, 0 or more")
        prefix = query.get("prefix", "")
        if offset and not prefix:
            raise UploadError("prefix: the digest of the bytes before the offset is needed")
        final = query.get("final", "1")
        if final not in ("0", "1"):
            raise UploadError("final: 1 for the last part of a push (the default), 0 for another")
        end: int | None = None
        if "end" in query:
            try:
                end = int(query["end"])
            except ValueError:
                end = -1
            if end < offset or not query.get("end_prefix"):
                raise UploadError(
                    "end: where the part ends in the sender's file (not before its offset), "
                    "with end_prefix, the digest of the bytes up to there"
                )
        layout = query.get("layout", "file")
        if layout not in ("file", "folder") or layout == "folder" and (offset or final == "0"):
            raise UploadError(
                "layout: file (the default), or folder for a conversation folder sent whole "
                "(offset 0, one part) as a tar of its files"
            )
        return cls(
            key,
            name,
            offset,
            prefix,
            final == "1",
            end,
            query.get("end_prefix", ""),
            folder=layout == "folder",
            replace=query.get("replace") == "1",
        )


class HeldElsewhere(UploadError):
    """The push does not go on from the bytes the site holds: send from *offset* (409)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message, status=409)
        self.offset = offset


@dataclass
class PushResult:
    """What a push did: the offset the site now holds and the bytes it added; for a
    final part, each session ingested (its result) and each run that was not, as
    (HTTP status, one line for the client)."""

    offset: int
    appended: int
    results: list[IngestResult] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)

    @property
    def changed_anything(self) -> bool:
        return bool(self.appended or any(result.new_items for result in self.results))


def held_copy(user: AbstractBaseUser, push: Push) -> Path:
    """Where the site holds the user's copy of the pushed recording."""
    digest = hashlib.sha256(push.key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return data_dir() / "pushed" / str(user.pk) / digest / push.name


def receive_push(
    request: HttpRequest, push: Push, *, owner: AbstractBaseUser, max_bytes: int
) -> PushResult:
    """Add what *request* sends to the user's copy of the recording and, for a final
    part, ingest it; raises UploadError (HeldElsewhere for a push from another offset).
    When no session of the recording was ingested, the copy is left as it was."""
    if content_length(request) > max_bytes:
        raise too_big(max_bytes)
    path = held_copy(owner, push)
    path.parent.mkdir(parents=True, exist_ok=True)
    if push.folder:
        with _locked(path.parent):
            return _receive_folder(request, path, owner, max_bytes)
    with _locked(path.parent):
        held = _Held.of(path)
        if push.offset != held.offset and not (push.replace and push.offset == 0):
            message = f"the server holds {held.offset:,} bytes of this recording: send from there"
            raise HeldElsewhere(message, held.offset)
        if push.offset and held.prefix != push.prefix:
            message = "the recording changed before the bytes the server holds: send it whole"
            raise HeldElsewhere(message, 0)
        with _body(request, path.parent, max_bytes) as body, _restored_on_error(path):
            appended = body.stat().st_size
            if push.offset:
                with body.open("rb") as new, path.open("ab") as copy:
                    shutil.copyfileobj(new, copy)
            else:
                os.replace(body, path)
            end = push.end if push.end is not None else push.offset + appended
            end_prefix = push.end_prefix or prefix_digest(path, path.stat().st_size) or ""
            _Held(end, end_prefix).keep(path)
            result = PushResult(end, appended)
            if push.final:
                _ingest(path, owner, result)
                if result.refused and not result.results:
                    status, message = result.refused[0]
                    raise UploadError(message, status=status)
    return result


def _receive_folder(
    request: HttpRequest, path: Path, owner: AbstractBaseUser, max_bytes: int
) -> PushResult:
    """A conversation folder sent whole: the tar unpacked beside the copy held, put in
    its place, and ingested; the former copy back in place should no session take it."""
    with _body(request, path.parent, max_bytes) as body:
        staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=".unpack-"))
        try:
            try:
                unpack_folder(body.read_bytes(), staging, path.name)
            except (tarfile.TarError, OSError) as error:
                raise UploadError(f"not a tar of the folder: {error}") from None
            unpacked = staging / path.name
            if not unpacked.is_dir() or [entry.name for entry in staging.iterdir()] != [path.name]:
                raise UploadError(f"the tar must hold the folder {path.name!r} and nothing else")
            result = PushResult(body.stat().st_size, body.stat().st_size)
            before = staging / ".before"
            if path.exists():
                path.rename(before)
            unpacked.rename(path)
            try:
                _ingest(path, owner, result)
                if result.refused and not result.results:
                    status, message = result.refused[0]
                    raise UploadError(message, status=status)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                if before.exists():
                    before.rename(path)
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    _Held(result.offset, "").keep(path)
    return result


def _ingest(path: Path, owner: AbstractBaseUser, result: PushResult) -> None:
    """Ingest the copy at *path* as `manage.py ingest` would, for *owner*."""
    options = IngestOptions(owner=owner, claimed_only=True)
    run = IngestRun(blob_store(), options, copies=kept_recordings())
    seen = run.seen
    mark = seen.key(path)
    state = seen.plan(path, mark)
    if state is None:  # as its last ingest left it
        return
    skipped: list[SkippedRecord] = []
    outcomes = run.outcomes(path, skipped, state)
    for label, outcome in outcomes:
        if isinstance(outcome, IngestResult):
            result.results.append(outcome)
        else:
            said = f"{label}: " if label else ""
            result.refused.append((_status(outcome), said + _message(outcome)))
    if result.refused:
        seen.forget(path)
    else:
        seen.remember(path, mark, state)


def _status(error: BaseException) -> int:
    if isinstance(error, NotARecording):
        return NOT_A_RECORDING
    if isinstance(error, NotTheirs):
        return 403
    if isinstance(error, OutdatedSession):
        return 409
    if isinstance(error, SessionPruned):
        return 410
    return 400


def _message(error: BaseException) -> str:
    if isinstance(error, NotARecording):
        return "not a recording in any format blobviewer reads"
    if isinstance(error, IngestError):
        return client_message(error)
    return "the server could not ingest it; its log says why"


@dataclass(frozen=True)
class _Held:
    """What the site holds of a pushed recording, in the sender's terms: the offset its
    copy reaches in the sender's file, and the digest of the sender's bytes up to there."""

    offset: int
    prefix: str

    @classmethod
    def of(cls, path: Path) -> _Held:
        try:
            held = json.loads(_held_file(path).read_text("utf-8"))
            return cls(int(held["offset"]), str(held["prefix"]))
        except (OSError, ValueError, KeyError, TypeError):
            return cls(0, "")  # nothing held yet (or a record that cannot be read)

    def keep(self, path: Path) -> None:
        _held_file(path).write_text(json.dumps({"offset": self.offset, "prefix": self.prefix}))


def _held_file(path: Path) -> Path:
    return path.parent / ".held.json"


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One push of a recording at a time (on this host)."""
    with (folder / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def _body(request: HttpRequest, folder: Path, max_bytes: int) -> Iterator[Path]:
    """The request's body, in a temporary file in *folder* (removed after)."""
    fd, name = tempfile.mkstemp(dir=folder, prefix=".push-", suffix=".part")
    body = Path(name)
    try:
        with os.fdopen(fd, "wb") as file:
            copy_body(request, file, max_bytes=max_bytes)
        yield body
    finally:
        body.unlink(missing_ok=True)


@contextmanager
def _restored_on_error(path: Path) -> Iterator[None]:
    """*path* as it was before the block, should the block raise: its first bytes (a
    copy grows only) or its whole former content (a copy replaced); and what is held."""
    size = path.stat().st_size if path.is_file() else 0
    held = _Held.of(path)
    backup = path.with_name(f".{path.name}.before") if size else None
    if backup is not None:
        backup.unlink(missing_ok=True)  # left by a push that was killed
        os.link(path, backup)
    try:
        yield
    except BaseException:
        held.keep(path)
        if backup is None:
            path.unlink(missing_ok=True)
        elif backup.stat().st_ino != path.stat().st_ino:  # replaced
            os.replace(backup, path)
        else:  # appended to
            os.truncate(path, size)
        raise
    finally:
        if backup is not None:
            backup.unlink(missing_ok=True)
