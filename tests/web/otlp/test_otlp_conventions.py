"""The receiver's other conventions (docs/otlp.md): OpenInference's spans, Codex's and
Claude Code's log events, a conversation found through its trace, and blob references an
agent already made (`blobviewer.blob_ids`)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from blobviewer.data_dir import blob_store
from blobviewer.ingest.rows import promoted_blob_id
from blobviewer.models import BlobRef, Session
from blobviewer.otlp.receiving import conversation_session
from core.content import Structured, Text
from core.store.blob_id import new_blob_id
from web.otlp.otlp_requests import BIG, SECOND, T0, as_otlp_json, post, steps


def spans_of(*specs: tuple[str, int, int, dict[str, Any]]) -> list[ReadableSpan]:
    """Spans (name, start second, end second, attributes), one trace, in that order."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    root = tracer.start_span("root", start_time=T0)
    with trace.use_span(root, end_on_exit=False):
        for name, start, end, attributes in specs:
            span = tracer.start_span(name, start_time=T0 + start * SECOND, attributes=attributes)
            span.end(end_time=T0 + end * SECOND)
    root.end(end_time=T0 + 10 * SECOND)
    return list(memory.get_finished_spans())


@pytest.mark.django_db
def test_openinference_llm_and_tool_spans(client, api_token, data_dir):
    session = {"session.id": "oi-session"}
    spans = spans_of(
        (
            "ChatOpenAI",
            0,
            1,
            {
                **session,
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini",
                "llm.token_count.prompt": 321,
                "llm.token_count.completion": 12,
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Be brief.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "List the files.",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Listing them.",
            },
        ),
        (
            "list_files",
            2,
            3,
            {
                **session,
                "openinference.span.kind": "TOOL",
                "tool.name": "list_files",
                "input.value": '{"path": "."}',
                "output.value": BIG,
            },
        ),
    )
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    items = steps("oi-session")
    assert [(item.type, item.tool) for item in items] == [
        ("user", ""),
        ("assistant", ""),
        ("assistant", ""),
        ("tool_result", "list_files"),
    ]
    user, turn, call, result = items
    assert user.text == "List the files."
    assert (turn.text, turn.input_tokens, turn.output_tokens) == ("Listing them.", 321, 12)
    assert call.tool_calls[0]["name"] == "list_files"
    assert call.tool_calls[0]["arguments"] == {"path": "."}
    assert blob_store().load_sync(promoted_blob_id(result)) == Text(BIG)
    assert Session.objects.get(id=conversation_session("oi-session")).model == "gpt-4o-mini"


@pytest.mark.django_db
def test_spans_of_a_trace_that_names_its_conversation_once_join_it(client, api_token, data_dir):
    spans = spans_of(
        ("chat", 0, 1, {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "c-7"}),
        (
            "execute_tool ls",
            2,
            3,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ls"},
        ),
    )
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    assert [item.type for item in steps("c-7")] == ["assistant", "assistant", "tool_result"]


@pytest.mark.django_db
def test_a_blob_an_agent_already_stored_is_linked(client, api_token, data_dir):
    blob_id = new_blob_id()
    blob_store().put_sync(blob_id, Text("stored by the agent\n" * 100))
    spans = spans_of(
        (
            "execute_tool grep",
            0,
            1,
            {
                "gen_ai.conversation.id": "c-blob",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "grep",
                "gen_ai.tool.call.result": "3 matches, kept whole in the blob",
                "blobviewer.blob_ids": [str(blob_id)],
            },
        ),
    )
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    result = steps("c-blob")[-1]
    assert result.output == f"3 matches, kept whole in the blob\n[blob:{blob_id}]"
    assert BlobRef.objects.filter(item=result, blob_id=blob_id).exists()


def logs_body(conversation_attribute: str, event: str, **attributes: Any) -> bytes:
    """An OTLP/JSON logs request of one event, as Codex and Claude Code send them."""
    values = {conversation_attribute: "run-42", "event.name": event, **attributes}
    record = {
        "timeUnixNano": str(T0),
        "body": {"stringValue": event},
        "attributes": [
            {"key": key, "value": {"stringValue": value}} for key, value in values.items()
        ],
    }
    document = {
        "resourceLogs": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "codex"}}]
                },
                "scopeLogs": [{"scope": {"name": "codex"}, "logRecords": [record]}],
            }
        ]
    }
    return json.dumps(document).encode()


def post_logs(client: Any, body: bytes, secret: str) -> Any:
    return client.post(
        "/v1/logs",
        data=body,
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )


@pytest.mark.django_db
def test_a_codex_tool_result_event_with_its_output(client, api_token, data_dir):
    body = logs_body(
        "conversation.id",
        "codex.tool_result",
        tool_name="shell",
        call_id="call_9",
        arguments='{"command": ["ls"]}',
        output=BIG,
        success="true",
    )
    response = post_logs(client, body, api_token[1])
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {}
    call, result = steps("run-42")
    assert call.tool_calls == [{"id": "call_9", "name": "shell", "arguments": {"command": ["ls"]}}]
    assert (result.tool, result.call_id, result.is_error) == ("shell", "call_9", False)
    assert blob_store().load_sync(promoted_blob_id(result)) == Text(BIG)
    # The same event again adds nothing.
    assert post_logs(client, body, api_token[1]).status_code == 200
    assert len(steps("run-42")) == 2


@pytest.mark.django_db
def test_a_claude_code_tool_result_without_its_content_says_so(client, api_token, data_dir):
    body = logs_body(
        "session.id",
        "claude_code.tool_result",
        tool_name="Bash",
        success="false",
        tool_result_size_bytes="5120",
        error="exit code 2",
    )
    assert post_logs(client, body, api_token[1]).status_code == 200
    _, result = steps("run-42")
    assert result.is_error
    assert result.output == (
        "(output not sent: 5120 bytes; the agent sends it with OTEL_LOG_TOOL_CONTENT=1)\n"
        "exit code 2"
    )


@pytest.mark.django_db(transaction=True)
def test_the_sdk_log_exporter_sends_a_codex_event(live_server, api_token, data_dir):
    """Codex's `codex.tool_result` as the official SDK's OTLP/HTTP log exporter sends it
    (protobuf, the event's name in the record's event_name)."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    exporter = OTLPLogExporter(
        endpoint=f"{live_server.url}/v1/logs", headers={"Authorization": f"Bearer {api_token[1]}"}
    )
    provider = LoggerProvider(resource=Resource.create({"service.name": "codex_exec"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    provider.get_logger("codex_otel").emit(
        timestamp=T0,
        event_name="codex.tool_result",
        attributes={
            "conversation.id": "codex-run",
            "tool_name": "shell",
            "call_id": "call_1",
            "arguments": '{"command": ["pytest"]}',
            "duration_ms": "1500",
            "success": "false",
            "output": "1 failed",
        },
    )
    provider.force_flush()
    provider.shutdown()  # its kept-alive connection would hold a server thread past the test
    call, result = steps("codex-run")
    assert call.tool_calls[0]["arguments"] == {"command": ["pytest"]}
    assert (result.output, result.is_error) == ("1 failed", True)
    assert result.at - call.at == timedelta(milliseconds=1500)


@pytest.mark.django_db
def test_messages_over_the_threshold_are_promoted_as_outputs_are(client, api_token, data_dir):
    """A long prompt and a long answer (a pasted document, a written report) are stored
    as blobs and their turns hold the summaries; a short message stays whole."""
    prompt = "".join(f"clause {n}: the tenant keeps the garden tidy.\n" for n in range(60))
    answer = json.dumps({"findings": [{"clause": n, "ok": n % 7 != 0} for n in range(80)]})
    spans = spans_of(
        (
            "chat gpt-4.1",
            0,
            1,
            {
                "gen_ai.conversation.id": "long-messages",
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
                ),
            },
        ),
        (
            "chat gpt-4.1",
            2,
            3,
            {
                "gen_ai.conversation.id": "long-messages",
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Thanks."}]}]
                ),
            },
        ),
    )
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    user, turn, thanks, _ = steps("long-messages")
    store = blob_store()
    for item, whole in ((user, Text(prompt)), (turn, Structured(json.loads(answer)))):
        assert item.text.startswith("[blob:") and len(item.text.encode()) <= 400
        blob_id = uuid.UUID(item.text[6:42])
        assert BlobRef.objects.filter(item=item, blob_id=blob_id).exists()
        assert store.load_sync(blob_id) == whole  # the answer is JSON: a JSON blob
    assert thanks.text == "Thanks."


@pytest.mark.django_db
def test_a_rebuild_that_promotes_a_message_anew_replaces_its_old_blob(
    client, api_token, data_dir, monkeypatch
):
    from blobviewer.ingest.importers import otlp
    from blobviewer.ingest.options import IngestOptions
    from blobviewer.ingest.sessions import ingest_file
    from blobviewer.models import Blob
    from blobviewer.otlp.receiving import kept_path

    report = "".join(f"finding {n}: the gate is left open at night.\n" for n in range(40))
    spans = spans_of(
        (
            "chat gpt-4.1",
            0,
            1,
            {
                "gen_ai.conversation.id": "report",
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": report}]}]
                ),
            },
        ),
    )
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    (turn,) = steps("report")
    old = uuid.UUID(turn.text[6:42])
    # The importer improves: the answer now reads differently, so its blob is another.
    answer_text = otlp._answer_text
    monkeypatch.setattr(otlp, "_answer_text", lambda attributes: answer_text(attributes).upper())
    monkeypatch.setattr(otlp, "IMPORTER_VERSION", otlp.IMPORTER_VERSION + 1)
    ingest_file(
        kept_path(conversation_session("report")),
        store=blob_store(),
        options=IngestOptions(rebuild=True),
    )
    (turn,) = steps("report")
    new = uuid.UUID(turn.text[6:42])
    assert new != old and blob_store().load_sync(new) == Text(report.upper())
    assert Blob.objects.get(pk=old).replaced_by_id == new
