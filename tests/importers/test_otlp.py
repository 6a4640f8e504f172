"""The `otlp` importer (blobviewer/ingest/importers/otlp.py): a conversation's kept spans
as a session, without the receiver."""

from __future__ import annotations

import json

from blobviewer.ingest.importers.otlp import recording_of

SECOND = 1_000_000_000


def chat_span(span_id: str, start: int, messages: list[dict], answer: str) -> dict:
    return {
        "kind": "span",
        "trace_id": "ab" * 16,
        "span_id": span_id,
        "name": "chat",
        "start": start * SECOND,
        "end": (start + 1) * SECOND,
        "status": {"code": 0, "message": ""},
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
        },
        "resource": {},
    }


def test_a_later_call_whose_input_ends_with_a_tool_result_adds_no_user_turn():
    ask = {"role": "user", "parts": [{"type": "text", "content": "How many rows?"}]}
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "response": "42"}]}
    lines = [
        chat_span("02" * 8, 5, [ask, result], "42 rows."),
        chat_span("01" * 8, 1, [ask], "Counting."),
    ]
    records = recording_of({"id": "0" * 32, "conversation": "c"}, lines).records
    assert [(r["seq"], r["type"], r["text"]) for r in records] == [
        (1, "user", "How many rows?"),
        (2, "assistant", "Counting."),
        (3, "assistant", "42 rows."),
    ]


def test_the_same_lines_in_any_order_make_the_same_records():
    ask = {"role": "user", "parts": [{"type": "text", "content": "Hi"}]}
    lines = [chat_span(f"{n:016x}", n, [ask], f"answer {n}") for n in range(5)]
    header = {"id": "0" * 32, "conversation": "c"}
    assert recording_of(header, lines).records == recording_of(header, lines[::-1]).records


def test_messages_in_their_event_form():
    line = chat_span("03" * 8, 1, [], "")
    line["attributes"] = {"gen_ai.operation.name": "chat"}
    line["events"] = [
        {"name": "gen_ai.user.message", "time": 0, "attributes": {"content": "Hello?"}},
        {
            "name": "gen_ai.choice",
            "time": 0,
            "attributes": {"message": json.dumps({"role": "assistant", "content": "Hi."})},
        },
    ]
    records = recording_of({"id": "0" * 32, "conversation": "c"}, [line]).records
    assert [(r["type"], r["text"]) for r in records] == [("user", "Hello?"), ("assistant", "Hi.")]


def test_the_inference_details_event_holds_the_messages():
    line = chat_span("04" * 8, 1, [], "")
    details = {
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Q"}]}]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "A"}]}]
        ),
    }
    line["attributes"] = {"gen_ai.operation.name": "chat"}
    line["events"] = [
        {"name": "gen_ai.client.inference.operation.details", "time": 0, "attributes": details}
    ]
    records = recording_of({"id": "0" * 32, "conversation": "c"}, [line]).records
    assert [(r["type"], r["text"]) for r in records] == [("user", "Q"), ("assistant", "A")]


def test_a_retriever_span_is_a_step_whose_output_is_its_documents():
    line = chat_span("05" * 8, 1, [], "")
    line["name"] = "retrieve"
    line["attributes"] = {
        "openinference.span.kind": "RETRIEVER",
        "input.value": "refund policy",
        "retrieval.documents.1.document.content": "second",
        "retrieval.documents.0.document.content": "first",
    }
    call, result = recording_of({"id": "0" * 32, "conversation": "c"}, [line]).records
    assert call["tool_calls"][0]["name"] == "retrieve"
    assert call["tool_calls"][0]["arguments"] == "refund policy"
    assert result["output"] == '["first","second"]'
