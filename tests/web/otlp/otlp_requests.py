"""What the OTLP receiver's tests send: times, a 2 MB output, OTLP/JSON of SDK spans, and
the items a conversation made."""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from blobviewer.models import Item
from blobviewer.otlp.receiving import conversation_session

BIG = "".join(f"row {n}: " + "x" * 40 + "\n" for n in range(45_000))  # about 2 MB
SECOND = 1_000_000_000
T0 = 1_764_900_000 * SECOND


def as_otlp_json(spans: list[ReadableSpan]) -> bytes:
    """The batch in OTLP/JSON: the protobuf JSON mapping, with ids in hex."""
    document = json_format.MessageToDict(encode_spans(spans))
    return json.dumps(_hex_ids(document)).encode()


def _hex_ids(value: Any) -> Any:
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    if isinstance(value, dict):
        return {
            key: base64.b64decode(item).hex()
            if key in ("traceId", "spanId", "parentSpanId")
            else _hex_ids(item)
            for key, item in value.items()
        }
    return value


def post(client: Any, body: bytes, secret: str | None, **headers: str) -> Any:
    """POST /v1/traces with the Django test client (OTLP/JSON unless told)."""
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    content_type = headers.pop("content_type", "application/json")
    return client.post("/v1/traces", data=body, content_type=content_type, headers=headers)


def steps(conversation: str) -> list[Item]:
    """The items of a conversation's session, in order."""
    session_id = conversation_session(conversation)
    return list(Item.objects.filter(session_id=session_id).order_by("seq"))
