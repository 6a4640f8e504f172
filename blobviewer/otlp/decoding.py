"""An OTLP/HTTP export request's body, decoded with the official `opentelemetry-proto`
messages, as plain JSON lines grouped by conversation (what blobviewer.ingest.importers.otlp
maps to a session).

A span becomes `{"kind": "span", "trace_id", "span_id", "parent_span_id", "name",
"start", "end", "status": {"code", "message"}, "attributes", "resource", "scope"}`, a log
record `{"kind": "log", "event", "time", "trace_id", "span_id", "severity", "body",
"attributes", "resource", "scope"}`: ids in hex, times in nanoseconds since the epoch,
attribute values as JSON values (an array as a list, a key-value list as an object,
bytes in hex).
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

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

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# Where a conversation's key is, first found first: the GenAI conventions', OpenInference's,
# Codex's (its log events) and Claude Code's.
CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id", "conversation.id")


class BadBody(ValueError):
    """The body does not parse as the export request it should be (HTTP 400)."""


@dataclass(frozen=True)
class Signal:
    """Traces or logs: the request and response messages, and where the records are."""

    name: str  # "spans" or "log records", as partial_success counts them
    request: type[Message]
    response: type[Message]


TRACES = Signal("spans", ExportTraceServiceRequest, ExportTraceServiceResponse)
LOGS = Signal("log records", ExportLogsServiceRequest, ExportLogsServiceResponse)


@dataclass
class Decoded:
    """A request's lines by conversation key, and the records refused (with why)."""

    conversations: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    refused: int = 0
    why: str = ""


def decode(signal: Signal, body: bytes, content_type: str) -> Decoded:
    """The lines of an export request; raises BadBody."""
    message = signal.request()
    try:
        if content_type == PROTOBUF:
            message.ParseFromString(body)
        else:
            json_format.ParseDict(_with_base64_ids(orjson.loads(body)), message)
    except (DecodeError, json_format.ParseError, orjson.JSONDecodeError, ValueError) as error:
        raise BadBody(f"not an OTLP {signal.request.__name__}: {error}") from None
    decoded = Decoded()
    lines = list(_spans(message) if signal is TRACES else _logs(message))
    keys = _trace_conversations(lines)
    for line in lines:
        if not line.get("span_id") and line["kind"] == "span":
            decoded.refused += 1
            decoded.why = "a span without a span id"
            continue
        decoded.conversations[_conversation(line, keys)].append(line)
    return decoded


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
# RESOURCE_EXHAUSTED.
_RPC_CODES = {400: 3, 403: 7, 413: 8, 415: 3, 429: 8}


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


def _spans(request: Any) -> Iterator[dict[str, Any]]:
    for resource_spans in request.resource_spans:
        resource = attribute_map(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                yield {
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


def _logs(request: Any) -> Iterator[dict[str, Any]]:
    for resource_logs in request.resource_logs:
        resource = attribute_map(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope.name
            for record in scope_logs.log_records:
                attributes = attribute_map(record.attributes)
                yield {
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


# --- conversations --------------------------------------------------------------------------


def _own_key(line: Mapping[str, Any]) -> str:
    attributes = line["attributes"]
    for name in CONVERSATION_KEYS:
        if found := attributes.get(name) or line["resource"].get(name):
            return str(found)
    return ""


def _trace_conversations(lines: list[dict[str, Any]]) -> dict[str, str]:
    """The conversation of each trace whose lines name one (spans of the trace that do
    not name it join it)."""
    keys: dict[str, str] = {}
    for line in lines:
        if (key := _own_key(line)) and line.get("trace_id"):
            keys.setdefault(line["trace_id"], key)
    return keys


def _conversation(line: Mapping[str, Any], trace_keys: Mapping[str, str]) -> str:
    """A line's conversation: its own key, its trace's, else its trace id (a log record
    with none of them: its service's name)."""
    if key := _own_key(line):
        return key
    trace_id = line.get("trace_id", "")
    if trace_id:
        return trace_keys.get(trace_id, trace_id)
    return f"service:{line['resource'].get('service.name', 'unknown')}"
