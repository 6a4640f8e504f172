"""How the receiver takes a request in (docs/otlp.md#limits): spooled, never whole in
memory as bytes, and a trace's spans that arrive before the span naming their
conversation joining it once it comes."""

from __future__ import annotations

import gzip
import json
import mmap

import pytest
from django.core.handlers.wsgi import WSGIRequest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from blobviewer.ingest.rows import promoted_blob_id
from blobviewer.models import Blob, Session, TraceConversation
from blobviewer.otlp import views
from blobviewer.otlp.receiving import conversation_session, kept_path
from web.otlp.otlp_requests import BIG, as_otlp_json, post, steps
from web.otlp.test_otlp_conventions import spans_of


def agent_run() -> list:
    """A run whose conversation only the agent's span names (it ends, and is exported,
    after its tools' and model calls' spans), and a tool span that ends after it."""
    return spans_of(
        (
            "execute_tool fetch",
            1,
            2,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "fetch",
                "gen_ai.tool.call.result": BIG,
            },
        ),
        (
            "chat gpt-4.1",
            3,
            4,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Fetched."}]}]
                ),
            },
        ),
        (
            "invoke_agent joiner",
            0,
            9,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "joiner",
                "gen_ai.conversation.id": "joined",
            },
        ),
        (
            "execute_tool late",
            5,
            6,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "late",
                "gen_ai.tool.call.result": "done",
            },
        ),
    )


@pytest.mark.django_db
def test_spans_sent_before_their_conversation_is_named_join_it(
    client, api_token, data_dir, django_capture_on_commit_callbacks
):
    fetch, chat, agent, late, _root = agent_run()
    trace = f"{fetch.context.trace_id:032x}"
    for span in (fetch, chat):
        assert post(client, as_otlp_json([span]), api_token[1]).status_code == 200
    # Until then the trace is its own session, whose item made the blob.
    provisional = Session.objects.get(id=conversation_session(trace))
    assert [item.type for item in steps(trace)] == ["assistant", "tool_result", "assistant"]
    first_blob = promoted_blob_id(steps(trace)[1])
    with django_capture_on_commit_callbacks(execute=True):  # the trace's kept file goes then
        assert post(client, as_otlp_json([agent]), api_token[1]).status_code == 200
    joined = Session.objects.get(id=conversation_session("joined"))
    assert joined.title == "joiner"
    items = steps("joined")
    assert [(item.type, item.tool) for item in items] == [
        ("assistant", ""),
        ("tool_result", "fetch"),
        ("assistant", ""),
    ]
    assert items[2].text == "Fetched."
    assert not Session.objects.filter(id=provisional.id).exists()
    assert not kept_path(provisional.id).exists()
    # The output promoted in the trace's session is the conversation's, in the same blob.
    assert promoted_blob_id(items[1]) == first_blob
    assert list(Blob.objects.values_list("id", "replaced_by_id")) == [(first_blob, None)]
    assert Blob.objects.get(pk=first_blob).made_by_id == items[1].pk
    assert TraceConversation.objects.get(trace_id=trace).session_id == joined.id
    # A span of the trace that comes later, naming nothing, joins the conversation.
    assert post(client, as_otlp_json([late]), api_token[1]).status_code == 200
    assert [item.tool for item in steps("joined")] == ["", "fetch", "", "", "late"]
    assert not Session.objects.filter(id=conversation_session(trace)).exists()


@pytest.mark.django_db
def test_another_users_spans_of_the_same_trace_stay_theirs(
    client, api_token, data_dir, django_user_model
):
    from blobviewer.models import ApiToken

    fetch, chat, agent, _, _ = agent_run()
    trace = f"{fetch.context.trace_id:032x}"
    bob = django_user_model.objects.create_user("bob")
    _, bobs = ApiToken.objects.issue(user=bob, name="bob's agent")
    assert post(client, as_otlp_json([fetch]), bobs).status_code == 200
    assert post(client, as_otlp_json([chat, agent]), api_token[1]).status_code == 200
    # Alice's conversation has her spans only; Bob's trace session is his, as it was.
    assert [item.tool for item in steps("joined")] == [""]
    assert Session.objects.get(id=conversation_session(trace)).owner == bob
    assert [item.tool for item in steps(trace)] == ["", "fetch"]
    # Bob's next span of that trace is not sent to Alice's conversation.
    assert post(client, as_otlp_json([fetch]), bobs).status_code == 200
    assert [item.tool for item in steps("joined")] == [""]


@pytest.mark.django_db
def test_a_request_is_read_in_blocks_into_a_file_never_whole(
    client, api_token, data_dir, monkeypatch
):
    reads: list[int] = []
    read = WSGIRequest.read

    def counted(self, *args, **kwargs):
        data = read(self, *args, **kwargs)
        reads.append(len(data))
        return data

    def whole(self):
        raise AssertionError("the body was read whole")

    decoded_from = []
    decode = views.decode

    def decoding(signal, body, content_type, into):
        decoded_from.append((type(body.obj), len(body)))
        return decode(signal, body, content_type, into)

    monkeypatch.setattr(WSGIRequest, "read", counted)
    monkeypatch.setattr(WSGIRequest, "body", property(whole))
    monkeypatch.setattr(views, "decode", decoding)
    body = encode_spans(agent_run()).SerializeToString()
    response = post(
        client,
        gzip.compress(body),
        api_token[1],
        content_type="application/x-protobuf",
        **{"Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.content
    assert sum(reads) == len(gzip.compress(body)) and max(reads) <= 64 * 1024
    assert decoded_from == [(mmap.mmap, len(body))]  # the spooled file, gunzipped
    assert len(steps("joined")) == 5


@pytest.mark.django_db
def test_a_gzip_body_cut_short_is_refused(client, api_token, data_dir):
    body = gzip.compress(as_otlp_json(agent_run()))
    response = post(client, body[: len(body) // 2], api_token[1], **{"Content-Encoding": "gzip"})
    assert response.status_code == 400
    assert json.loads(response.content)["message"].startswith("not a gzip body")
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_pruning_a_conversation_takes_its_kept_spans_and_traces_along(client, api_token, data_dir):
    from datetime import timedelta

    from django.utils import timezone

    from blobviewer.catalog.retention import prune

    spans = agent_run()
    assert post(client, as_otlp_json(spans), api_token[1]).status_code == 200
    session_id = conversation_session("joined")
    assert kept_path(session_id).exists() and TraceConversation.objects.exists()
    long_ago = timezone.now() - timedelta(days=200)
    Session.objects.filter(id=session_id).update(updated_at=long_ago)
    report = prune(older_than=timedelta(days=90))
    assert report.sessions == 1
    assert not kept_path(session_id).exists()
    assert not TraceConversation.objects.exists()


@pytest.mark.django_db
def test_a_gzip_body_of_several_members_is_read_whole(client, api_token, data_dir):
    document = json.loads(as_otlp_json(agent_run()))
    whole = json.dumps(document).encode()
    middle = len(whole) // 2
    body = gzip.compress(whole[:middle]) + gzip.compress(whole[middle:])  # as `cat a.gz b.gz`
    response = post(client, body, api_token[1], **{"Content-Encoding": "gzip"})
    assert response.status_code == 200, response.content
    assert len(steps("joined")) == 5


@pytest.mark.django_db
def test_ids_of_the_wrong_length_are_refused_in_partial_success(client, api_token, data_dir):
    document = json.loads(as_otlp_json(agent_run()))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"] = "ab" * 20  # 20 bytes
    spans[1]["spanId"] = "ab" * 4  # 4 bytes
    response = post(client, json.dumps(document).encode(), api_token[1])
    assert response.status_code == 200
    assert json.loads(response.content)["partialSuccess"]["rejectedSpans"] == "2"
    assert [item.tool for item in steps("joined")] == ["", "late"]


@pytest.mark.django_db
def test_a_pruned_conversation_is_answered_410_and_nothing_is_kept(client, api_token, data_dir):
    from datetime import timedelta

    from django.utils import timezone

    from blobviewer.catalog.retention import prune

    fetch, chat, agent, late, _ = agent_run()
    assert post(client, as_otlp_json([fetch, agent]), api_token[1]).status_code == 200
    session_id = conversation_session("joined")
    Session.objects.filter(id=session_id).update(updated_at=timezone.now() - timedelta(days=200))
    assert prune(older_than=timedelta(days=90)).sessions == 1
    response = post(client, as_otlp_json([chat, agent]), api_token[1])
    assert response.status_code == 410
    assert "was pruned" in json.loads(response.content)["message"]
    assert not kept_path(session_id).exists()
    assert not Session.objects.filter(id=session_id).exists()


@pytest.mark.django_db
def test_a_request_reads_its_conversations_kept_spans_once(
    client, api_token, data_dir, monkeypatch
):
    """What a request costs grows with its conversation: the kept file is read once, to
    know which spans it holds and to map them with the new ones."""
    from blobviewer.ingest.importers import otlp

    fetch, chat, agent, late, _root = agent_run()
    read_kept = otlp.read_kept
    reads: list[str] = []

    def counted(path):
        reads.append(path.name)
        return read_kept(path)

    monkeypatch.setattr(otlp, "read_kept", counted)
    kept = kept_path(conversation_session("joined")).name
    per_request = []
    for span in (agent, fetch, chat, late, fetch):  # the last one sent again
        reads.clear()
        assert post(client, as_otlp_json([span]), api_token[1]).status_code == 200
        per_request.append(reads.count(kept))
    assert per_request == [0, 1, 1, 1, 1]  # the first request made the file
    tools = [item.tool for item in steps("joined")]
    assert tools.count("fetch") == 1 and tools.count("late") == 1  # sent again: held once


@pytest.mark.django_db
def test_a_kept_file_a_crash_cut_off_mid_line_is_appended_to_after_its_last_whole_line(
    client, api_token, data_dir
):
    fetch, chat, agent, late, _root = agent_run()
    assert post(client, as_otlp_json([agent]), api_token[1]).status_code == 200
    path = kept_path(conversation_session("joined"))
    whole = path.read_bytes()
    with path.open("ab") as file:  # a write broken off: the request it was part of failed
        file.write(b'{"kind": "span", "trace_id": "ab')

    for span in (fetch, chat):
        assert post(client, as_otlp_json([span]), api_token[1]).status_code == 200

    data = path.read_bytes()
    assert data.startswith(whole) and data.endswith(b"\n") and b'"trace_id": "ab' not in data
    assert [json.loads(line)["kind"] for line in data.splitlines()[1:]] == ["span"] * 3
    assert [item.tool for item in steps("joined")].count("fetch") == 1


@pytest.mark.parametrize(
    ("data", "kept"),
    [
        (b"", b""),
        (b'{"a": 1}\n', b'{"a": 1}\n'),
        (b'{"a": 1}\n{"b": ', b'{"a": 1}\n'),
        (b'{"a": 1}\n' + b"x" * 200_000, b'{"a": 1}\n'),  # cut off over several blocks
        (b"x" * 100_000, b""),  # not even the header whole
    ],
)
def test_a_partial_last_line_is_cut_off_whatever_its_length(tmp_path, data, kept):
    from blobviewer.otlp.receiving import _without_partial_line

    path = tmp_path / "kept.jsonl"
    path.write_bytes(data)
    assert _without_partial_line(path) == len(kept)
    assert path.read_bytes() == kept
