"""Sessions sent over HTTP (`POST /api/sessions`): a session log and the blobs it references.

An upload is read and checked whole before anything is kept: the log is parsed from a
temporary file, and every blob file must be named `<uuid>.txt` or `<uuid>.json` and
decode as its suffix says. Then, before anything is stored, the session must be the
token's user's (or new: it becomes theirs), the log must continue the one saved before
byte for byte, and each blob it fills in must be the user's to send
(blobviewer.team.ownership). Only then are the blobs stored, the session ingested and
the log saved as `<id>.jsonl` among the site's session logs (blobviewer.catalog.session_logs: the
data directory's `sessions/`, or `<prefix>/sessions/` in an object store), so a refused
upload leaves no trace. No message sent to a client names a path on the server.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.catalog.retention import upload_refusal
from blobviewer.catalog.session_logs import LogBusy, LogDiverges, session_logs
from blobviewer.data_dir import blob_store, blobs_url, data_dir, sessions_dir
from blobviewer.ingest.errors import IngestError, OutdatedSession, SessionPruned
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.planning import repeated_seq
from blobviewer.ingest.sessions import IngestResult, ingest_session
from blobviewer.models import Blob, BlobRef, Session
from blobviewer.search.indexing import index_pending_blobs
from blobviewer.team.ownership import NotYours, check_blob_fills, claim_session
from core.agent.session_log import SessionLog, SessionLogError, read_session_log
from core.content import Content, Structured, Text, decode_text
from core.json_values import JsonError, parse_json
from core.redaction import redact_json, redact_lines, redact_text
from core.store.blob_id import BlobId, parse_blob_id
from core.store.errors import BlobStoreError, StoreUnavailable

logger = logging.getLogger(__name__)

# A raw body is one session log; these are the types JSON Lines goes by.
RAW_LOG_TYPES = ("application/x-ndjson", "application/jsonl", "text/plain")
MULTIPART = "multipart/form-data"

_CHUNK = 64 * 1024
_EMPTY = "empty body: expected a session log, one JSON object per line, with a Content-Length"
_BLOB_FILE = re.compile(
    r"(?P<id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"\.(?P<suffix>txt|json)"
)


class UploadError(Exception):
    """An upload was refused. The message is one line for the client; *status* the HTTP one."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Upload:
    """A checked upload: the parsed log, the file it was read from, and the blobs."""

    log: SessionLog
    log_file: Path  # a temporary file in <data>/sessions/, which save_upload may move
    blobs: dict[BlobId, Content]

    @property
    def line_count(self) -> int:
        return 1 + len(self.log.records)


@dataclass(frozen=True)
class UploadResult:
    session: Session
    new_items: int
    items: int
    blobs: int  # the blobs the session references
    missing_blobs: int  # of those, the ones the store does not have
    new_blobs: int  # blob files this upload added to the store

    @property
    def changed_anything(self) -> bool:
        return bool(self.new_items or self.new_blobs)


@contextmanager
def received_upload(request: HttpRequest, *, max_bytes: int) -> Iterator[Upload]:
    """The checked upload in *request*; raises UploadError. The temporary file of the log
    is removed on the way out unless save_upload moved it into place."""
    length = content_length(request)
    if length == 0:
        raise UploadError(_EMPTY)
    if length > max_bytes:
        raise too_big(max_bytes)
    # On this host's disk whatever the store: a log is read twice (checked, compared) and
    # only then kept. Named so that nothing reading sessions/*.jsonl ever picks it up
    # half written, and `blobs gc` knows it for a leftover.
    directory = sessions_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=directory, prefix=".upload-", suffix=".part")
    temp = Path(name)
    try:
        with os.fdopen(fd, "wb") as file:
            if request.content_type == MULTIPART:
                blobs = _receive_multipart(request, file)
            elif request.content_type in RAW_LOG_TYPES:
                copy_body(request, file, max_bytes=max_bytes)
                blobs = {}
            else:
                raise UploadError(
                    f"unsupported Content-Type {request.content_type or '(none)'!r}: send a "
                    f"session log as {', '.join(RAW_LOG_TYPES)}, or {MULTIPART} with a "
                    '"log" file and "blob" files',
                    status=415,
                )
        _redact_file(temp)
        yield Upload(_read_log(temp), temp, blobs)
    finally:
        temp.unlink(missing_ok=True)


def save_upload(upload: Upload, *, owner: AbstractBaseUser) -> UploadResult:
    """Store the blobs, save the log and ingest the session for *owner*, the token's user;
    the same upload twice adds nothing. Raises UploadError, with nothing written: 403 when
    the session is another user's or nobody's, or a blob it fills in is not the user's to
    send; 409 when the log does not continue the one saved before; 410 when the session, or
    a blob the upload brings, was deleted by retention; 400 when ingest refuses the session
    (the database is then as it was)."""
    store = blob_store()
    logs = session_logs()
    session_id = uuid.UUID(upload.log.id)
    added: list[BlobId] = []
    result: IngestResult | None = None
    # A session or a blob that retention deleted is not recorded again: 410, nothing written.
    if refusal := upload_refusal(upload.log.id, upload.blobs):
        raise UploadError(refusal, status=410)
    try:
        with transaction.atomic():
            # Before anything is stored: the session is the user's (its row stays locked
            # to the end, so uploads of one session take turns), the log only grows, and
            # every blob it fills in is the user's to send.
            claim_session(session_id, owner)
            log_check = logs.check(session_id, upload.log_file)
            check_blob_fills(upload.blobs, user=owner, store=store)
            for blob_id, content in upload.blobs.items():
                if store.put_sync(blob_id, content):  # False: already stored, and immutable
                    added.append(blob_id)
            result = ingest_session(
                upload.log.header,
                upload.log.records,
                source_path=logs.location(session_id),
                store=store,
                source_format="blobviewer",
                options=IngestOptions(owner=owner),
            )
            # Blobs sent after the items that reference them: their rows said "missing".
            for blob in Blob.objects.filter(id__in=added, missing=True):
                refresh_blob(blob.id, store=store, row=blob)
            # ...and now search sees inside them too.
            index_pending_blobs(store=store, blob_ids=added)
            # Last, and still inside the transaction: in an object store another host
            # may have grown the log since it was checked; then it is compared again
            # (a log that no longer continues rolls all of this back: 409).
            logs.save(session_id, upload.log_file, log_check)
    except BaseException as error:
        # The blobs this upload sent stay in the store: a concurrent upload may already
        # rely on one that this one happened to write first, and a blob no session
        # references is harmless (it is listed under /blobs/). The blobs ingest promoted
        # have fresh ids that nothing else can know, so they go.
        for blob_id in result.stored_blobs if result else ():
            store.discard_sync(blob_id)
        if isinstance(error, NotYours):
            raise UploadError(str(error), status=403) from None
        if isinstance(error, LogDiverges):
            raise UploadError(str(error), status=409) from None
        if isinstance(error, BlobStoreError):  # e.g. the object store cannot be reached
            # The store's error may name its endpoint or bucket: the log has it, not the agent.
            logger.warning("upload of session %s: %s", upload.log.id, error)
            said = "is not answering" if isinstance(error, StoreUnavailable) else "failed"
            raise UploadError(
                f"the blob store {said}; nothing was recorded, send it again later", status=503
            ) from None
        if isinstance(error, LogBusy):
            raise UploadError(
                "the session's log is being replaced by other uploads; send it again in a moment",
                status=503,
            ) from None
        if isinstance(error, SessionPruned):  # pruned while this upload was on its way
            refusal = upload_refusal(upload.log.id, ()) or error.message
            raise UploadError(refusal, status=410) from None
        if isinstance(error, OutdatedSession):  # recorded by another importer version
            raise UploadError(error.message, status=409) from None
        if isinstance(error, IngestError):
            raise UploadError(client_message(error)) from None
        raise
    referenced = BlobRef.objects.filter(session_id=result.session_id).values("blob_id")
    return UploadResult(
        session=Session.objects.get(id=result.session_id),
        new_items=result.new_items,
        items=result.total_items,
        blobs=result.blobs,
        missing_blobs=Blob.objects.filter(id__in=referenced, missing=True).count(),
        new_blobs=len(added),
    )


# --- reading -------------------------------------------------------------------------------


def content_length(request: HttpRequest) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def too_big(max_bytes: int) -> UploadError:
    return UploadError(
        f"upload too large: at most {max_bytes:,} bytes (BLOBVIEWER_UPLOAD_MAX_BYTES); "
        "send it in parts",
        status=413,
    )


def copy_body(request: HttpRequest, file: IO[bytes], *, max_bytes: int) -> None:
    # Streamed, never request.body: that holds the whole body in memory and stops at
    # DATA_UPLOAD_MAX_MEMORY_SIZE, far below the size of a long session log.
    received = 0
    while chunk := request.read(_CHUNK):
        received += len(chunk)
        if received > max_bytes:
            raise too_big(max_bytes)
        file.write(chunk)


def _receive_multipart(request: HttpRequest, file: IO[bytes]) -> dict[BlobId, Content]:
    """Copy the "log" file into *file*; return the checked "blob" files."""
    try:
        files, fields = request.FILES, request.POST
    except TooManyFilesSent:
        raise UploadError(
            f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files in one upload; send "
            "the blobs over several uploads, each with the log",
            status=413,
        ) from None
    except (RequestDataTooBig, TooManyFieldsSent):
        raise UploadError("form fields too large: send the log and blobs as files") from None
    except MultiPartParserError as error:
        raise UploadError(f"malformed multipart body: {error}") from None
    if unexpected := sorted((set(files) | set(fields)) - {"log", "blob"}):
        raise UploadError(
            f"unexpected field {unexpected[0]!r}: send the session log as the file "
            '"log" and each blob as a file "blob"'
        )
    logs = files.getlist("log")
    if len(logs) != 1:
        raise UploadError(
            'a multipart upload needs exactly one file "log", the session log '
            "(curl -F log=@<session>.jsonl)"
        )
    for chunk in logs[0].chunks(_CHUNK):
        file.write(chunk)
    return _read_blobs(files.getlist("blob"))


def _read_blobs(files: Sequence[UploadedFile]) -> dict[BlobId, Content]:
    blobs: dict[BlobId, Content] = {}
    for upload in files:
        name = upload.name or ""
        match = _BLOB_FILE.fullmatch(name)
        if match is None:
            raise UploadError(
                f"blob file {name!r}: the name must be <uuid>.txt or <uuid>.json, as in "
                "the blob store"
            )
        blob_id = parse_blob_id(match["id"])
        if blob_id in blobs:
            raise UploadError(f"blob file {name!r}: blob {blob_id} is sent twice")
        blobs[blob_id] = _blob_content(name, match["suffix"], upload.read())
    return blobs


def _blob_content(name: str, suffix: str, data: bytes) -> Content:
    """The blob a file holds, its secrets redacted before it is stored (core.redaction)."""
    if suffix == "txt":
        try:
            return Text(redact_text(decode_text(data))[0])
        except UnicodeDecodeError as error:
            raise UploadError(f"blob file {name!r}: not UTF-8 at byte {error.start}") from None
    try:
        return Structured(redact_json(parse_json(data))[0])
    except JsonError as error:
        raise UploadError(f"blob file {name!r}: not JSON: {error}") from None


def _redact_file(path: Path) -> None:
    """The uploaded log at *path* with each line's secrets redacted, before anything reads
    or keeps it (a line redacts the same in every upload, so a grown log still begins
    with the one kept)."""
    data = path.read_bytes()
    redacted, kinds = redact_lines(data)
    if kinds:
        path.write_bytes(redacted)


def _read_log(path: Path) -> SessionLog:
    if path.stat().st_size == 0:
        raise UploadError(_EMPTY)
    try:
        log = read_session_log(path)
    except SessionLogError as error:
        raise UploadError(_at_line(error.line, error.message)) from None
    if log.torn_tail:
        # A file on disk may end in a line still being written; an upload is complete
        # or it was cut off on the way.
        line = len(log.records) + 2
        raise UploadError(f"line {line}: cut off: the last line is not complete JSON")
    _check_unique_seqs(log)
    return log


def _check_unique_seqs(log: SessionLog) -> None:
    # Ingest refuses these too, but only after the blobs would be stored; here the
    # message can also name the line.
    repeat = repeated_seq(log.records)
    if repeat is not None:  # records are lines 2 and on
        seq, line, first_line = repeat[0], repeat[1] + 2, repeat[2] + 2
        raise UploadError(
            f"line {line}: seq {seq} appears more than once (first on line {first_line})"
        )


def client_message(error: IngestError) -> str:
    """What a client is told of *error*: its line and message, never a server path."""
    return _without_server_paths(_at_line(error.line, error.message))


def _at_line(line: int | None, message: str) -> str:
    # Never the server's path of the file: the client knows which log it sent.
    return f"line {line}: {message}" if line else message


def _without_server_paths(message: str) -> str:
    # Ingest words its messages for clients (paths go to IngestError.detail, for the
    # CLI), but an error from below, a database's or a file system's, could still carry
    # one in: the data directory's path never leaves the server.
    root = data_dir()
    for spelling in sorted({str(root.resolve()), str(root.absolute())}, key=len, reverse=True):
        message = message.replace(spelling, "<data>")
    # Nor does the object store's bucket and prefix.
    if url := blobs_url():
        message = message.replace(url, "<store>")
    return message
