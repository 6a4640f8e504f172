"""`POST /v1/traces` and `POST /v1/logs`: the OTLP/HTTP receiver (docs/otlp.md).

A request is authenticated by an API token as uploads are (blobviewer.team.views), spooled
to a temporary file up to the upload limit (gzip undone as it arrives, bounded too),
decoded from that file's mapping into lines in a second file (blobviewer.otlp.decoding),
and recorded conversation by conversation from there (blobviewer.otlp.receiving): a
request is held in memory once, as its parsed message, and only while it is decoded. The
answer is the Export…ServiceResponse in the request's encoding, a refusal a google.rpc.Status in it.
"""

from __future__ import annotations

import io
import logging
import mmap
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from blobviewer.data_dir import data_dir
from blobviewer.ingest.errors import IngestError, SessionPruned
from blobviewer.otlp.decoding import (
    JSON,
    LOGS,
    PROTOBUF,
    TRACES,
    BadBody,
    Signal,
    decode,
    refusal_body,
)
from blobviewer.otlp.decoding import response_body as export_response
from blobviewer.otlp.flood import retry_after
from blobviewer.otlp.receiving import check_owner, conversations, receive
from blobviewer.responses import plain_text
from blobviewer.team.ownership import NotYours
from blobviewer.team.uploads import UploadError, content_length, copy_body, too_big
from blobviewer.team.views import api_token

logger = logging.getLogger(__name__)
_CHUNK = 64 * 1024


@login_not_required  # exporters authenticate with an API token
@csrf_exempt  # no cookies, so no cross-site request can carry the token
@require_POST
def traces(request: HttpRequest) -> HttpResponse:
    """Record the spans of an ExportTraceServiceRequest."""
    return _export(request, TRACES)


@login_not_required
@csrf_exempt
@require_POST
def logs(request: HttpRequest) -> HttpResponse:
    """Record the log records (events) of an ExportLogsServiceRequest."""
    return _export(request, LOGS)


def _export(request: HttpRequest, signal: Signal) -> HttpResponse:
    token = api_token(request)
    if isinstance(token, HttpResponse):
        return token
    content_type = request.content_type
    per_minute = settings.BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE
    if wait := retry_after(token, per_minute=per_minute):
        response = _refused(
            f"more than {per_minute} requests a minute from this token", 429, content_type
        )
        response["Retry-After"] = str(wait)
        return response
    if content_type not in (PROTOBUF, JSON):
        said = f"unsupported Content-Type {content_type or '(none)'!r}: send {PROTOBUF} or {JSON}"
        return _refused(said, 415, content_type)
    try:
        with (
            _spooled(request, max_bytes=settings.BLOBVIEWER_UPLOAD_MAX_BYTES) as body,
            tempfile.TemporaryFile(dir=_spool_dir()) as lines,
        ):
            decoded = decode(signal, body.view, content_type, lines)
            body.release()  # the message is let go too: from here on, only lines on disk
            request_conversations = conversations(decoded, token.user)
            check_owner(request_conversations, token.user)
            for conversation in request_conversations:
                receive(conversation, lines, owner=token.user)
    except UploadError as error:
        return _refused(error.message, error.status, content_type)
    except BadBody as error:
        return _refused(str(error), 400, content_type)
    except NotYours as error:
        return _refused(str(error), 403, content_type)
    except SessionPruned as error:
        return _refused(error.message, 410, content_type)
    except IngestError as error:
        logger.warning("OTLP export refused: %s", error)
        return _refused(error.message, 400, content_type)
    return HttpResponse(export_response(signal, decoded, content_type), content_type=content_type)


class _Body:
    """The request's body, spooled to a file and mapped (a view the parser reads without a
    copy), released once decoded."""

    def __init__(self, file: IO[bytes]) -> None:
        size = file.seek(0, io.SEEK_END)
        self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        self.view = memoryview(self._map) if self._map is not None else memoryview(b"")

    def release(self) -> None:
        self.view.release()
        if self._map is not None:
            self._map.close()
            self._map = None


@contextmanager
def _spooled(request: HttpRequest, *, max_bytes: int) -> Iterator[_Body]:
    """The request's body, gunzipped as it arrives when it says so, in a temporary file
    (never in memory whole): a view of it. Raises UploadError (413 over *max_bytes*,
    before or after gzip; 400 for a damaged gzip stream; 415 for another encoding)."""
    if content_length(request) > max_bytes:
        raise too_big(max_bytes)
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip"):
        raise UploadError(
            f"unsupported Content-Encoding {encoding!r}: send gzip or none", status=415
        )
    with tempfile.TemporaryFile(dir=_spool_dir()) as file:
        if encoding == "gzip":
            _gunzip(request, file, max_bytes=max_bytes)
        else:
            copy_body(request, file, max_bytes=max_bytes)
        body = _Body(file)
        try:
            yield body
        finally:
            body.release()


def _gunzip(request: HttpRequest, file: IO[bytes], *, max_bytes: int) -> None:
    """Write the gunzipped body to *file* as it arrives: every member of it (a gzip file
    may be several, one after another), at most *max_bytes* in and out."""
    inflater = zlib.decompressobj(wbits=31)
    received = written = 0
    try:
        while chunk := request.read(_CHUNK):
            received += len(chunk)
            while chunk:
                if inflater.eof:  # the next member begins
                    chunk, inflater = inflater.unused_data + chunk, zlib.decompressobj(wbits=31)
                data = inflater.decompress(chunk, _CHUNK)
                written += len(data)
                if received > max_bytes or written > max_bytes:
                    raise too_big(max_bytes)
                file.write(data)
                chunk = inflater.unconsumed_tail
                if inflater.eof and inflater.unused_data:
                    chunk, inflater = inflater.unused_data, zlib.decompressobj(wbits=31)
        written += file.write(inflater.flush())
    except zlib.error as error:
        raise UploadError(f"not a gzip body: {error}") from None
    if not inflater.eof:
        raise UploadError("not a gzip body: it ends before its stream does")
    if written > max_bytes:
        raise too_big(max_bytes)


def _spool_dir() -> Path:
    """Where a request is spooled: beside the kept conversations, on the disk that holds
    the data (not a small /tmp); the files have no name, so nothing is left behind."""
    folder = data_dir() / "otlp"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _refused(message: str, status: int, content_type: str) -> HttpResponse:
    """A refusal: a google.rpc.Status in the request's encoding, as OTLP/HTTP asks (its
    message is what exporters log); one line of text for a request of another type."""
    if content_type in (PROTOBUF, JSON):
        body = refusal_body(status, message, content_type)
        return HttpResponse(body, content_type=content_type, status=status)
    return plain_text(message + "\n", status=status)
