"""`blobviewer push` of a recording bigger than what the server takes at once: in parts,
a whole line each, the server's limit found by halving (blobviewer.push.sending). The
client talks to the site in this process (httpx's WSGI transport)."""

from __future__ import annotations

import json

import httpx
import pytest
from django.core.wsgi import get_wsgi_application

from blobviewer.models import Item, Session
from blobviewer.push.sending import Pusher, PushState
from importers.recordings import FIXTURES

pytestmark = pytest.mark.django_db(transaction=True)

CODEX = FIXTURES.joinpath(
    "codex", "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
)


@pytest.fixture
def pusher(api_token, tmp_path, data_dir):
    posts: list[int] = []

    def count(request: httpx.Request) -> None:
        posts.append(len(request.content))

    transport = httpx.WSGITransport(app=get_wsgi_application())
    state = PushState(tmp_path / "state.json", "http://testserver")
    pusher = Pusher("http://testserver", api_token[1], state, transport=transport)
    pusher.http.event_hooks["request"] = [count]
    pusher.posts = posts  # type: ignore[attr-defined]
    yield pusher
    pusher.close()


def test_a_recording_over_the_servers_limit_goes_in_parts_of_whole_lines(
    pusher, settings, tmp_path
):
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 200_000  # the rollout is 748 KB
    recording = tmp_path / CODEX.name
    recording.write_bytes(CODEX.read_bytes())

    outcome = pusher.push(recording)

    assert outcome.kind == "sent", outcome.line()
    assert outcome.sent_bytes == recording.stat().st_size
    accepted = [size for size in pusher.posts if size <= 200_000]
    assert len(accepted) >= 4 and max(accepted) <= 200_000  # halved until the server took it
    assert pusher.part_bytes <= 200_000
    session = Session.objects.get()
    assert session.item_count == Item.objects.count() > 100


def test_a_line_still_being_written_waits_for_its_newline(pusher, tmp_path):
    recording = tmp_path / CODEX.name
    data = CODEX.read_bytes()
    start = data.index(b"\n", len(data) // 2) + 1  # where a line starts
    recording.write_bytes(data[: start + 1])  # its first byte written

    first = pusher.push(recording)
    recording.write_bytes(data)
    second = pusher.push(recording)

    assert first.sent_bytes == start  # up to the last whole line
    assert second.sent_bytes == len(data) - start
    assert Session.objects.get().item_count == Item.objects.count()


GEMINI = FIXTURES / "gemini" / "gemini_golden.json"


def test_a_recording_rewritten_as_it_grows_is_sent_whole_each_time_it_changes(pusher, tmp_path):
    """A JSON document (Gemini CLI's session file) is rewritten, not appended to: each
    push of it replaces the copy the server holds."""
    recording = tmp_path / GEMINI.name
    document = json.loads(GEMINI.read_text())
    messages = document["messages"]
    document["messages"] = messages[:2]
    recording.write_text(json.dumps(document))
    first = pusher.push(recording)
    document["messages"] = messages
    recording.write_text(json.dumps(document, indent=1))

    again = pusher.push(recording)

    assert first.kind == again.kind == "sent", (first.line(), again.line())
    assert again.sent_bytes == recording.stat().st_size
    assert Session.objects.get().item_count == Item.objects.count() > 2


def test_a_json_lines_file_rewritten_from_its_start_is_sent_whole(pusher, tmp_path):
    recording = tmp_path / CODEX.name
    data = CODEX.read_bytes()
    recording.write_bytes(data[: data.index(b"\n", 10_000) + 1])
    assert pusher.push(recording).kind == "sent"
    pusher.state.path.unlink()  # and the state is lost too
    pusher.state = PushState(pusher.state.path, pusher.state.server)
    recording.write_bytes(data.replace(b"2026-05-11", b"2026-05-12", 1))

    outcome = pusher.push(recording)

    assert outcome.kind in ("sent", "refused"), outcome.line()
    assert outcome.kind == "refused" or outcome.sent_bytes == recording.stat().st_size


def test_a_server_error_is_not_kept_as_a_refusal(tmp_path):
    answers = iter(
        [
            httpx.Response(500, text="Internal Server Error"),
            httpx.Response(201, json={"offset": 2, "sessions": [], "refused": []}),
        ]
    )
    transport = httpx.MockTransport(lambda request: next(answers))
    recording = tmp_path / "run.json"
    recording.write_text("{}")
    pusher = Pusher(
        "http://testserver", "bv_x", PushState(tmp_path / "s.json", "x"), transport=transport
    )

    first, second = pusher.push(recording), pusher.push(recording)

    assert first.kind == "failed" and "HTTP 500" in first.message
    assert second.kind == "sent"
