"""An OTLP/HTTP export request's body, decoded with the official `opentelemetry-proto`
messages, as plain JSON lines (what blobviewer.ingest.importers.otlp maps to a session),
written one at a time to a file: the request is held once, as its message (protobuf) or
its parsed document (OTLP/JSON, whose spans are parsed into messages one by one and let
go), never again as its lines.

A span becomes `{"kind": "span", "trace_id", "span_id", "parent_span_id", "name",
"start", "end", "status": {"code", "message"}, "attributes", "resource", "scope"}`, a log
record `{"kind": "log", "event", "time", "trace_id", "span_id", "severity", "body",
"attributes", "resource", "scope"}`: ids in hex, times in nanoseconds since the epoch,
attribute values as JSON values (an array as a list, a key-value list as an object,
bytes in hex).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from blobviewer.ingest.importers.otlp import line_id

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# Where a conversation's key is, first found first: the GenAI conventions', OpenInference's,
# Codex's (its log events) and Claude Code's.
CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id", "conversation.id")


class BadBody(ValueError):
    """The body does not parse as the export request it should be (HTTP 400)."""


@dataclass(frozen=True)
class Signal:
    """Traces or logs: the request and response messages, and the three levels of the
    request that hold the records (resource, scope, record: their field names in the
    message and in OTLP/JSON, and their messages)."""

    name: str  # "spans" or "log records", as partial_success counts them
    request: type[Message]
    response: type[Message]
    fields: tuple[str, str, str]
    json_fields: tuple[str, str, str]
    levels: tuple[type[Message], type[Message], type[Message]]


TRACES = Signal(
    "spans",
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
    ("resource_spans", "scope_spans", "spans"),
    ("resourceSpans", "scopeSpans", "spans"),
    (ResourceSpans, ScopeSpans, Span),
)
LOGS = Signal(
    "log records",
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
    ("resource_logs", "scope_logs", "log_records"),
    ("resourceLogs", "scopeLogs", "logRecords"),
    (ResourceLogs, ScopeLogs, LogRecord),
)


@dataclass(frozen=True)
class Entry:
    """One line of a request, as written: where it is in the file, what tells it from
    another (otlp.line_id), and what names its conversation."""

    offset: int
    size: int
    line_id: str
    own_key: str  # the conversation it names itself ("" for none)
    trace_id: str
    service: str


@dataclass
class Decoded:
    """A request's lines (in the file decode wrote), and the records refused (with why)."""

    entries: list[Entry] = field(default_factory=list)
    refused: int = 0
    why: str = ""


def decode(signal: Signal, body: bytes | memoryview, content_type: str, into: IO[bytes]) -> Decoded:
    """Write the lines of an export request to *into*, each ended by a newline; what was
    written. Raises BadBody (what was written then means nothing)."""
    decoded = Decoded()
    try:
        for line in _lines(signal, body, content_type):
            if why := _bad_ids(line):
                decoded.refused += 1
                decoded.why = why
                continue
            data = orjson.dumps(line) + b"\n"
            decoded.entries.append(
                Entry(
                    into.tell(),
                    len(data),
                    line_id(line),
                    own_key(line),
                    line.get("trace_id", ""),
                    str(line["resource"].get("service.name", "unknown")),
                )
            )
            into.write(data)
    except (DecodeError, json_format.ParseError, orjson.JSONDecodeError, ValueError) as error:
        raise BadBody(f"not an OTLP {signal.request.__name__}: {error}") from None
    into.flush()
    return decoded


def _bad_ids(line: Mapping[str, Any]) -> str:
    """Why a line's ids are refused ("" when they are not): a span has a span id of 8
    bytes and a trace id of 16, as OTLP says; a log record no trace id, or one of 16."""
    span_id, trace_id = line.get("span_id", ""), line.get("trace_id", "")
    if line["kind"] == "span":
        if not span_id:
            return "a span without a span id"
        if len(span_id) != 16 or len(trace_id) != 32:
            return "a span whose trace id is not 16 bytes or whose span id is not 8"
    elif trace_id and len(trace_id) != 32:
        return "a log record whose trace id is not 16 bytes"
    return ""


def own_key(line: Mapping[str, Any]) -> str:
    """The conversation a line names itself, "" when it names none."""
    attributes = line["attributes"]
    for name in CONVERSATION_KEYS:
        if found := attributes.get(name) or line["resource"].get(name):
            return str(found)
    return ""


def _lines(signal: Signal, body: bytes | memoryview, content_type: str) -> Iterator[dict[str, Any]]:
    records = _parsed(signal, body) if content_type == PROTOBUF else _parsed_json(signal, body)
    line = _span_line if signal is TRACES else _log_line
    for resource, scope, record in records:
        yield line(record, resource, scope)


Records = Iterator[tuple[dict[str, Any], str, Any]]  # (resource, scope name, record)


def _parsed(signal: Signal, body: bytes | memoryview) -> Records:
    message = signal.request()
    message.ParseFromString(body)
    outer, middle, inner = signal.fields
    for resource_part in getattr(message, outer):
        resource = attribute_map(resource_part.resource.attributes)
        for scope_part in getattr(resource_part, middle):
            for record in getattr(scope_part, inner):
                yield resource, scope_part.scope.name, record


def _parsed_json(signal: Signal, body: bytes | memoryview) -> Records:
    """The records of an OTLP/JSON request, each parsed into its message as it comes and
    its part of the document let go; the fields around them are parsed too, so that what
    the whole message would refuse is refused."""
    document = orjson.loads(body)
    _, resource_parts = _level(signal, 0, document, signal.request())
    for resource_part in resource_parts:
        resource_message, scope_parts = _level(signal, 1, resource_part, signal.levels[0]())
        resource = attribute_map(resource_message.resource.attributes)
        for scope_part in scope_parts:
            scope_message, records = _level(signal, 2, scope_part, signal.levels[1]())
            for index, value in enumerate(records):
                records[index] = None  # its message is all that is kept of it
                record = json_format.ParseDict(_with_base64_ids(value), signal.levels[2]())
                yield resource, scope_message.scope.name, record


def _level(signal: Signal, level: int, value: Any, message: Message) -> tuple[Message, list[Any]]:
    """*value* (a part of the document at *level*) parsed into *message*, all but the list
    of the parts below it, which comes out as it is; raises ValueError, ParseError."""
    if not isinstance(value, dict):
        raise ValueError(f"not an object: {str(value)[:60]!r}")
    names = (signal.fields[level], signal.json_fields[level])
    found = [value.pop(name) for name in names if name in value]
    if len(found) > 1 or (found and not isinstance(found[0], list)):
        raise ValueError(f"{names[1]} must be one list")
    json_format.ParseDict(_with_base64_ids(value), message)
    return message, found[0] if found else []


def response_body(signal: Signal, decoded: Decoded, content_type: str) -> bytes:
    """The Export…ServiceResponse, with partial_success when records were refused, in
    the encoding of the request."""
    response = signal.response()
    if decoded.refused:
        success = response.partial_success
        if signal is TRACES:
            success.rejected_spans = decoded.refused
        else:
            success.rejected_log_records = decoded.refused
        success.error_message = decoded.why
    if content_type == PROTOBUF:
        return response.SerializeToString()
    return json_format.MessageToJson(response, indent=None).encode()


# google.rpc.Code of each refusal's HTTP status: INVALID_ARGUMENT, PERMISSION_DENIED,
# NOT_FOUND, RESOURCE_EXHAUSTED.
_RPC_CODES = {400: 3, 403: 7, 410: 5, 413: 8, 415: 3, 429: 8}


def refusal_body(status: int, message: str, content_type: str) -> bytes:
    """A refusal as the specification asks: a google.rpc.Status with *message*, in the
    request's encoding."""
    refusal = Status(code=_RPC_CODES.get(status, 2), message=message)  # 2: UNKNOWN
    if content_type == PROTOBUF:
        return refusal.SerializeToString()
    return json_format.MessageToJson(refusal, indent=None).encode()


# --- OTLP/JSON ----------------------------------------------------------------------------

# OTLP/JSON writes trace and span ids in hex, where the protobuf JSON mapping has base64.
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _with_base64_ids(value: Any) -> Any:
    """The parsed OTLP/JSON *value* with its hex ids as the protobuf JSON mapping reads
    them; raises ValueError for an id that is not hex."""
    if isinstance(value, list):
        return [_with_base64_ids(item) for item in value]
    if not isinstance(value, dict):
        return value
    converted = {}
    for key, item in value.items():
        if key in _ID_FIELDS and isinstance(item, str):
            item = base64.b64encode(bytes.fromhex(item)).decode()
        elif key not in ("attributes", "body"):
            item = _with_base64_ids(item)
        converted[key] = item
    return converted


# --- lines ----------------------------------------------------------------------------------


def _span_line(span: Any, resource: dict[str, Any], scope: str) -> dict[str, Any]:
    return {
        "kind": "span",
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "status": {"code": span.status.code, "message": span.status.message},
        "attributes": attribute_map(span.attributes),
        "events": [_event(event) for event in span.events],
        "resource": resource,
        "scope": scope,
    }


def _event(event: Any) -> dict[str, Any]:
    return {
        "name": event.name,
        "time": event.time_unix_nano,
        "attributes": attribute_map(event.attributes),
    }


def _log_line(record: Any, resource: dict[str, Any], scope: str) -> dict[str, Any]:
    attributes = attribute_map(record.attributes)
    return {
        "kind": "log",
        "event": record.event_name or str(attributes.get("event.name", "")),
        "time": record.time_unix_nano or record.observed_time_unix_nano,
        "trace_id": record.trace_id.hex(),
        "span_id": record.span_id.hex(),
        "severity": record.severity_text,
        "body": any_value(record.body),
        "attributes": attributes,
        "resource": resource,
        "scope": scope,
    }


def attribute_map(attributes: Any) -> dict[str, Any]:
    """OTLP key-values as a JSON object."""
    return {pair.key: any_value(pair.value) for pair in attributes}


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as a JSON value (None when unset)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        pairs: list[KeyValue] = list(value.kvlist_value.values)
        return {pair.key: any_value(pair.value) for pair in pairs}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)
