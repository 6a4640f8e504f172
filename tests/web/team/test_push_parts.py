"""`blobviewer push` of a recording bigger than what the server takes at once: in parts,
a whole line each, the server's limit found by halving (blobviewer.push.sending). The
client talks to the site in this process (httpx's WSGI transport)."""

from __future__ import annotations

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
