"""`POST /v1/traces` and `POST /v1/logs`: the OTLP/HTTP receiver (docs/otlp.md).

A request is authenticated by an API token as uploads are (blobviewer.team.views), read
whole up to the upload limit (gzip undone, bounded too), decoded (blobviewer.otlp.decoding)
and recorded conversation by conversation (blobviewer.otlp.receiving). The answer is the
Export…ServiceResponse in the request's encoding, a refusal a google.rpc.Status in it.
"""

from __future__ import annotations

import io
import logging
import zlib

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from blobviewer.ingest.errors import IngestError
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
from blobviewer.otlp.receiving import check_owner, receive
from blobviewer.responses import plain_text
from blobviewer.team.ownership import NotYours
from blobviewer.team.uploads import UploadError, content_length, copy_body, too_big
from blobviewer.team.views import api_token

logger = logging.getLogger(__name__)


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
        body = _body(request, max_bytes=settings.BLOBVIEWER_UPLOAD_MAX_BYTES)
        decoded = decode(signal, body, content_type)
        del body  # the lines hold what it said; not the whole request twice
        check_owner(decoded.conversations, token.user)
        for key, lines in decoded.conversations.items():
            receive(key, lines, owner=token.user)
    except UploadError as error:
        return _refused(error.message, error.status, content_type)
    except BadBody as error:
        return _refused(str(error), 400, content_type)
    except NotYours as error:
        return _refused(str(error), 403, content_type)
    except IngestError as error:
        logger.warning("OTLP export refused: %s", error)
        return _refused(error.message, 400, content_type)
    return HttpResponse(export_response(signal, decoded, content_type), content_type=content_type)


def _body(request: HttpRequest, *, max_bytes: int) -> bytes:
    """The request's body, gunzipped when it says so; raises UploadError (413 over
    *max_bytes*, before or after gzip; 400 for a damaged gzip stream)."""
    if content_length(request) > max_bytes:
        raise too_big(max_bytes)
    buffer = io.BytesIO()
    copy_body(request, buffer, max_bytes=max_bytes)
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return buffer.getvalue()
    if encoding != "gzip":
        raise UploadError(
            f"unsupported Content-Encoding {encoding!r}: send gzip or none", status=415
        )
    inflater = zlib.decompressobj(wbits=31)
    try:
        body = inflater.decompress(buffer.getbuffer(), max_bytes + 1)
    except zlib.error as error:
        raise UploadError(f"not a gzip body: {error}") from None
    if len(body) > max_bytes or inflater.unconsumed_tail:
        raise too_big(max_bytes)
    return body


def _refused(message: str, status: int, content_type: str) -> HttpResponse:
    """A refusal: a google.rpc.Status in the request's encoding, as OTLP/HTTP asks (its
    message is what exporters log); one line of text for a request of another type."""
    if content_type in (PROTOBUF, JSON):
        body = refusal_body(status, message, content_type)
        return HttpResponse(body, content_type=content_type, status=status)
    return plain_text(message + "\n", status=status)
