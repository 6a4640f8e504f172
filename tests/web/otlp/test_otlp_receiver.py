"""`POST /v1/traces` and `/v1/logs` (docs/otlp.md): the official OpenTelemetry SDK and its
OTLP/HTTP exporter send an agent's GenAI spans to a live server, and the same batch goes
as OTLP/JSON; the session, its steps, tokens, errors and a 2 MB output come back whole."""

from __future__ import annotations

import gzip
import json

import pytest
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from blobviewer.data_dir import blob_store
from blobviewer.ingest.rows import promoted_blob_id
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import ApiToken, Blob, Session
from blobviewer.otlp.receiving import conversation_session, kept_path
from core.content import Text
from web.otlp.otlp_requests import BIG, SECOND, T0, as_otlp_json, post, steps


def genai_batch(conversation: str = "conv-1") -> list[ReadableSpan]:
    """An agent's run as GenAI-convention spans: a chat turn and two tool calls, the
    first with a 2 MB output, the second failing."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "report-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    common = {"gen_ai.conversation.id": conversation}
    agent = tracer.start_span(
        "invoke_agent reporter",
        start_time=T0,
        attributes={
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "reporter",
        },
    )
    chat = tracer.start_span(
        "chat gpt-4.1",
        start_time=T0 + SECOND // 10,
        attributes={
            **common,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 80,
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "Summarise week 49."}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "Fetching it."}]}]
            ),
        },
    )
    chat.end(end_time=T0 + SECOND)
    fetch = tracer.start_span(
        "execute_tool fetch_report",
        start_time=T0 + 2 * SECOND,
        attributes={
            **common,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "fetch_report",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"name": "week-49"}',
            "gen_ai.tool.call.result": BIG,
        },
    )
    fetch.end(end_time=T0 + 3 * SECOND)
    query = tracer.start_span(
        "execute_tool run_query",
        start_time=T0 + 4 * SECOND,
        attributes={
            **common,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "run_query",
            "gen_ai.tool.call.id": "call_2",
            "gen_ai.tool.call.arguments": '{"sql": "select 1 from sales"}',
        },
    )
    query.set_status(Status(StatusCode.ERROR, "table sales does not exist"))
    query.end(end_time=T0 + 5 * SECOND)
    agent.end(end_time=T0 + 6 * SECOND)
    return list(memory.get_finished_spans())


def exporter(url: str, secret: str) -> OTLPSpanExporter:
    return OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}
    )


def assert_the_run_reads_back(conversation: str = "conv-1") -> None:
    session = Session.objects.get(id=conversation_session(conversation))
    assert session.title == "reporter"
    assert session.model == "gpt-4.1"
    items = steps(conversation)
    assert [(item.type, item.tool) for item in items] == [
        ("user", ""),
        ("assistant", ""),
        ("assistant", ""),
        ("tool_result", "fetch_report"),
        ("assistant", ""),
        ("tool_result", "run_query"),
    ]
    user, turn, call, fetched, _, failed = items
    assert user.text == "Summarise week 49."
    assert (turn.text, turn.input_tokens, turn.output_tokens) == ("Fetching it.", 1200, 80)
    assert call.tool_calls == [
        {"id": "call_1", "name": "fetch_report", "arguments": {"name": "week-49"}}
    ]
    assert fetched.call_id == "call_1" and not fetched.is_error
    assert len(fetched.output.encode()) <= 400  # the summary; the output is in its blob
    blob_id = promoted_blob_id(fetched)
    assert blob_id is not None
    assert blob_store().load_sync(blob_id) == Text(BIG)
    assert failed.is_error and failed.output == "table sales does not exist"


@pytest.mark.django_db(transaction=True)
def test_the_sdk_exporter_records_a_run_with_its_2_mb_output_whole(
    live_server, api_token, data_dir
):
    _, secret = api_token
    sender = exporter(live_server.url, secret)
    try:
        assert sender.export(genai_batch()) == SpanExportResult.SUCCESS
    finally:
        # Its connection kept alive would keep the server's thread, and that thread's
        # database connection, past the test.
        sender.shutdown()
    assert_the_run_reads_back()
    session = Session.objects.get(id=conversation_session("conv-1"))
    assert session.owner == api_token[0].user
    assert session.source_format == "otlp"


@pytest.mark.django_db
def test_the_same_batch_as_otlp_json_with_hex_ids(client, api_token, data_dir):
    response = post(client, as_otlp_json(genai_batch()), api_token[1])
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {}  # nothing refused: no partial_success
    assert_the_run_reads_back()


@pytest.mark.django_db
def test_spans_out_of_order_and_sent_again_make_one_run_in_time_order(client, api_token, data_dir):
    spans = genai_batch()
    first_blob = None
    for span in reversed(spans):  # the agent span first, the chat turn last
        assert post(client, as_otlp_json([span]), api_token[1]).status_code == 200
        fetched = [item for item in steps("conv-1") if item.tool == "fetch_report"]
        if first_blob is None and fetched:  # the 2 MB output is in, before the chat turn
            first_blob = promoted_blob_id(fetched[-1])
            assert first_blob is not None
    assert_the_run_reads_back()
    # The 2 MB output was promoted before the chat turn came, which numbered it again: it
    # keeps its blob, and no other blob was stored.
    assert promoted_blob_id(steps("conv-1")[3]) == first_blob
    assert list(Blob.objects.values_list("id", "replaced_by_id")) == [(first_blob, None)]
    # Everything again, in one batch: nothing doubles, nothing is promoted again.
    blobs = set(blob_store().ids_sync())
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    assert_the_run_reads_back()
    assert set(blob_store().ids_sync()) == blobs
    assert len(kept_path(conversation_session("conv-1")).read_text().splitlines()) == 1 + 4


@pytest.mark.django_db
def test_a_gzip_body(client, api_token, data_dir):
    body = gzip.compress(as_otlp_json(genai_batch()))
    response = post(
        client, body, api_token[1], HTTP_CONTENT_ENCODING="gzip", **{"Content-Encoding": "gzip"}
    )
    assert response.status_code == 200, response.content
    assert_the_run_reads_back()


@pytest.mark.django_db
def test_refusals(client, api_token, data_dir, django_user_model, settings):
    secret = api_token[1]
    assert post(client, b"{not json", secret).status_code == 400
    bad_protobuf = post(client, b"\x0a\xff\xff\xff", secret, content_type="application/x-protobuf")
    assert bad_protobuf.status_code == 400
    said = RpcStatus.FromString(
        bad_protobuf.content
    )  # as OTLP/HTTP asks, in the request's encoding
    assert said.message.startswith("not an OTLP ExportTraceServiceRequest: ")
    assert json.loads(post(client, b"[", secret).content)["message"].startswith("not an OTLP")
    assert post(client, b"{}", secret, content_type="text/plain").status_code == 415
    no_token = post(client, b"{}", None)
    assert no_token.status_code == 401
    assert no_token["WWW-Authenticate"] == 'Bearer realm="blobviewer"'
    body = as_otlp_json(genai_batch())
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 1_000_000
    assert post(client, body, secret).status_code == 413
    assert (
        post(client, gzip.compress(body), secret, **{"Content-Encoding": "gzip"}).status_code == 413
    )
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 50 * 1024 * 1024
    assert post(client, body, secret).status_code == 200
    bob = django_user_model.objects.create_user("bob")
    _, bobs = ApiToken.objects.issue(user=bob, name="bob's agent")
    refused = post(client, body, bobs)
    assert refused.status_code == 403
    assert len(steps("conv-1")) == 6


@pytest.mark.django_db
def test_a_span_without_an_id_is_refused_in_partial_success(client, api_token, data_dir):
    document = json.loads(as_otlp_json(genai_batch()))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = ""
    response = post(client, json.dumps(document).encode(), api_token[1])
    assert response.status_code == 200
    assert json.loads(response.content) == {
        "partialSuccess": {"rejectedSpans": "1", "errorMessage": "a span without a span id"}
    }


@pytest.mark.django_db
def test_a_rebuild_maps_the_kept_spans_again(client, api_token, data_dir, monkeypatch):
    from blobviewer.ingest.importers import otlp
    from blobviewer.ingest.options import IngestOptions

    post(client, as_otlp_json(genai_batch()), api_token[1])
    before = [(item.seq, item.output) for item in steps("conv-1")]
    monkeypatch.setattr(otlp, "IMPORTER_VERSION", otlp.IMPORTER_VERSION + 1)
    result = ingest_file(
        kept_path(conversation_session("conv-1")),
        store=blob_store(),
        options=IngestOptions(rebuild=True),
    )
    assert result.rebuilt and result.new_items == 0
    assert [(item.seq, item.output) for item in steps("conv-1")] == before


@pytest.mark.django_db
def test_a_flood_from_one_token_is_answered_429_with_retry_after(
    client, api_token, data_dir, settings
):
    settings.BLOBVIEWER_OTLP_REQUESTS_PER_MINUTE = 2
    body = as_otlp_json(genai_batch("flood"))
    assert [post(client, body, api_token[1]).status_code for _ in range(2)] == [200, 200]
    refused = post(client, body, api_token[1])
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60


@pytest.mark.django_db
def test_a_request_after_the_mapping_improved_maps_the_conversation_again(
    client, api_token, data_dir, monkeypatch
):
    from blobviewer.ingest.importers import otlp

    spans = genai_batch()
    post(client, as_otlp_json(spans[:2]), api_token[1])
    monkeypatch.setattr(otlp, "IMPORTER_VERSION", otlp.IMPORTER_VERSION + 1)
    assert post(client, as_otlp_json(spans[2:]), api_token[1]).status_code == 200
    assert_the_run_reads_back()
    session = Session.objects.get(id=conversation_session("conv-1"))
    assert session.importer_version == otlp.IMPORTER_VERSION


@pytest.mark.django_db
def test_a_late_span_remakes_only_the_items_after_it(client, api_token, data_dir):
    chat, fetch, query, _agent = genai_batch()  # in the order they ended
    for span in (chat, query):
        assert post(client, as_otlp_json([span]), api_token[1]).status_code == 200
    before = {item.seq: item.pk for item in steps("conv-1")}
    assert post(client, as_otlp_json([fetch]), api_token[1]).status_code == 200
    after = steps("conv-1")
    assert [(item.seq, item.tool) for item in after] == [
        (1, ""),
        (2, ""),
        (3, ""),
        (4, "fetch_report"),
        (5, ""),
        (6, "run_query"),
    ]
    # The user's message and the model's turn, before the late span, are the same rows.
    assert [item.pk for item in after[:2]] == [before[1], before[2]]
    assert {item.pk for item in after[2:]}.isdisjoint(before.values())
