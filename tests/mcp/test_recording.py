"""core.mcp.recording.ProxyRecorder alone: the session log of a proxy run, and its uploads
to a live blobviewer server (`POST /api/sessions`)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from live_upload import wait_for

from blobviewer.data_dir import blob_store
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import ApiToken, Blob, Item, Session
from core.agent.history import AssistantMessage, ToolCall, ToolResult
from core.agent.session_log import read_session_log
from core.content import Structured, Text
from core.mcp.recording import ProxyRecorder
from core.promotion import admit_sync, promote
from core.store import FsBlobStore
from core.store.blob_id import new_blob_id

COMMAND = ["node", "server.js", "/srv/data"]
BIG_TEXT = "".join(f"line {n}: the quick brown fox\n" for n in range(1, 2001))
BIG_JSON = [{"id": n, "name": f"row {n}"} for n in range(500)]


@pytest.fixture
def agent_store(tmp_path: Path) -> FsBlobStore:
    """The proxy's own store, on the agent's machine (not the site's)."""
    return FsBlobStore(tmp_path / "agent" / "blobs")


def promoted(store: FsBlobStore, output: str) -> tuple[str, str]:
    """What the agent gets for a big output (its summary) and the blob it went to."""
    admitted = admit_sync(promote(output), store)
    assert admitted.blob_id is not None
    return admitted.text, str(admitted.blob_id)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the session log -------------------------------------------------------------------------


def test_each_call_is_a_tool_call_and_its_result_in_one_session_log(tmp_path, agent_store):
    summary, blob_id = promoted(agent_store, BIG_TEXT)
    recorder = ProxyRecorder(agent_store, tmp_path / "sessions", None, None, COMMAND)

    recorder.record_call("read_file", {"path": "/srv/data/big.txt"}, summary, [blob_id], False)
    recorder.record_call("inspect", {"blob_id": blob_id, "selector": "lines:2"}, "x", [], False)
    recorder.record_call("read_file", {"path": "/nope"}, "ENOENT: /nope", [], True)
    recorder.close()

    [path] = (tmp_path / "sessions").iterdir()
    assert path.name == f"{recorder.session_id}.jsonl"
    log = read_session_log(path)
    assert log.header["title"] == "MCP: node server.js /srv/data"
    assert log.header["meta"]["source"] == "mcp proxy"
    assert log.header["meta"]["command"] == COMMAND
    assert [record["seq"] for record in log.records] == [1, 2, 3, 4, 5, 6]
    assert log.items() == [
        AssistantMessage("", (ToolCall("mcp-1", "read_file", {"path": "/srv/data/big.txt"}),)),
        ToolResult("mcp-1", "read_file", summary),
        AssistantMessage(
            "", (ToolCall("mcp-2", "inspect", {"blob_id": blob_id, "selector": "lines:2"}),)
        ),
        ToolResult("mcp-2", "inspect", "x"),
        AssistantMessage("", (ToolCall("mcp-3", "read_file", {"path": "/nope"}),)),
        ToolResult("mcp-3", "read_file", "ENOENT: /nope", is_error=True),
    ]


def test_a_run_without_calls_leaves_no_empty_session(tmp_path, agent_store):
    recorder = ProxyRecorder(agent_store, tmp_path / "sessions", None, None, COMMAND)
    recorder.close()

    assert not (tmp_path / "sessions").exists()
    assert recorder.log_path is None


def test_without_a_log_dir_or_an_upload_url_nothing_is_recorded(tmp_path, agent_store, capsys):
    recorder = ProxyRecorder(agent_store, None, None, None, COMMAND)
    recorder.record_call("read_file", {"path": "a"}, "small", [], False)
    recorder.close()

    assert recorder.session_id is None
    assert recorder.log_path is None
    assert capsys.readouterr().err == ""


def test_concurrent_calls_keep_each_call_next_to_its_result(tmp_path, agent_store):
    recorder = ProxyRecorder(agent_store, tmp_path / "sessions", None, None, COMMAND)
    start = threading.Barrier(20)

    def call(n: int) -> None:
        start.wait()
        for round_ in range(10):
            recorder.record_call("echo", {"n": n, "round": round_}, f"{n}/{round_}", [], False)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recorder.close()

    items = read_session_log(recorder.log_path).items()
    assert len(items) == 400
    seen = set()
    for call_item, result in zip(items[::2], items[1::2], strict=True):
        [tool_call] = call_item.tool_calls
        assert result.call_id == tool_call.id
        arguments = tool_call.arguments
        assert result.output == f"{arguments['n']}/{arguments['round']}"
        seen.add(tool_call.id)
    assert len(seen) == 200


def test_a_log_that_cannot_be_written_never_breaks_a_call(tmp_path, agent_store, capsys):
    not_a_folder = tmp_path / "sessions"
    not_a_folder.write_text("a file where the folder should be")
    recorder = ProxyRecorder(agent_store, not_a_folder, None, None, COMMAND)

    recorder.record_call("read_file", {"path": "a"}, "one", [], False)
    recorder.record_call("read_file", {"path": "b"}, "two", [], False)
    recorder.close()

    err = capsys.readouterr().err
    assert err.count("cannot write the session log, so this run is not recorded") == 1
    assert not_a_folder.read_text() == "a file where the folder should be"


def test_arguments_that_are_not_json_are_said_and_the_call_goes_on(tmp_path, agent_store, capsys):
    recorder = ProxyRecorder(agent_store, tmp_path / "sessions", None, None, COMMAND)

    recorder.record_call("odd", {"value": object()}, "out", [], False)
    recorder.record_call("echo", {"n": 1}, "fine", [], False)
    recorder.close()

    assert "cannot record a call of 'odd'" in capsys.readouterr().err
    assert ToolResult("mcp-2", "echo", "fine") in read_session_log(recorder.log_path).items()


def test_the_log_ingests_and_links_its_blobs(tmp_path, data_dir, db):
    site_store = blob_store()  # docs/mcp.md's recipe: --dir is the site's blob store
    summary, blob_id = promoted(site_store, BIG_TEXT)
    recorder = ProxyRecorder(site_store, data_dir / "sessions", None, None, COMMAND)
    recorder.record_call("read_file", {"path": "big.txt"}, summary, [blob_id], False)
    recorder.close()

    ingest_file(recorder.log_path, store=site_store)

    session = Session.objects.get(id=recorder.session_id)
    assert session.title == "MCP: node server.js /srv/data"
    assert Item.objects.filter(session=session).count() == 2
    assert session.blob_refs.filter(blob_id=blob_id).exists()


# --- uploads -------------------------------------------------------------------------------


@pytest.fixture
def token(django_user_model: Any, transactional_db: None) -> tuple[ApiToken, str]:
    user = django_user_model.objects.create_user("alice", password="correct-horse-battery")
    return ApiToken.objects.issue(user=user, name="proxy")


def api_url(live_server: Any) -> str:
    return f"{live_server.url}/api/sessions"


def test_a_promoted_call_uploads_the_log_and_its_blob_before_close(
    live_server, data_dir, token, agent_store
):
    summary, blob_id = promoted(agent_store, BIG_TEXT)
    recorder = ProxyRecorder(agent_store, None, api_url(live_server), token[1], COMMAND)

    recorder.record_call("read_file", {"path": "big.txt"}, summary, [blob_id], False)

    wait_for(lambda: Session.objects.filter(id=recorder.session_id).exists(), what="upload")
    temp_log = recorder.log_path
    recorder.close()  # nothing new to send; and the server is done with the upload

    session = Session.objects.get(id=recorder.session_id)
    assert session.owner == token[0].user
    assert Item.objects.filter(session=session).count() == 2
    assert blob_store().load_sync(blob_id) == Text(BIG_TEXT)
    assert not temp_log.exists()  # all uploaded: the temporary copy goes


def test_close_uploads_what_came_after_the_last_promoted_call(
    live_server, data_dir, token, agent_store, tmp_path
):
    summary, blob_id = promoted(agent_store, orjson.dumps(BIG_JSON).decode())
    recorder = ProxyRecorder(
        agent_store, tmp_path / "sessions", api_url(live_server), token[1], COMMAND
    )
    recorder.record_call("list_rows", {}, summary, [blob_id], False)
    recorder.record_call("inspect", {"blob_id": blob_id, "selector": "slice:0..2"}, "…", [], False)
    recorder.record_call("echo", {"n": 1}, "small", [], False)

    recorder.close()

    session = Session.objects.get(id=recorder.session_id)
    assert Item.objects.filter(session=session).count() == 6
    assert blob_store().load_sync(blob_id) == Structured(BIG_JSON)
    assert not Blob.objects.get(id=blob_id).missing
    # The site's copy of the log is the proxy's, byte for byte.
    saved = data_dir / "sessions" / f"{recorder.session_id}.jsonl"
    assert saved.read_bytes() == recorder.log_path.read_bytes()


def test_a_refused_upload_is_retried_with_the_next_one(
    live_server, data_dir, token, agent_store, capsys
):
    api_token, secret = token
    api_token.revoke()
    first_summary, first_blob = promoted(agent_store, BIG_TEXT)
    recorder = ProxyRecorder(agent_store, None, api_url(live_server), secret, COMMAND)

    recorder.record_call("read_file", {"path": "one"}, first_summary, [first_blob], False)
    wait_for(lambda: "refused: 401" in capsys.readouterr().err, what="a refused upload")
    assert not Session.objects.filter(id=recorder.session_id).exists()

    ApiToken.objects.filter(pk=api_token.pk).update(revoked_at=None)
    second_summary, second_blob = promoted(agent_store, BIG_TEXT.upper())
    recorder.record_call("read_file", {"path": "two"}, second_summary, [second_blob], False)

    wait_for(
        lambda: Item.objects.filter(session_id=recorder.session_id).count() == 4,
        what="the retried upload",
    )
    assert blob_store().load_sync(first_blob) == Text(BIG_TEXT)
    assert blob_store().load_sync(second_blob) == Text(BIG_TEXT.upper())
    recorder.close()
    assert "works again" in capsys.readouterr().err


def test_a_dead_server_never_breaks_a_call_and_the_log_is_kept(tmp_path, agent_store, capsys):
    dead = f"http://127.0.0.1:{free_port()}/api/sessions"
    recorder = ProxyRecorder(agent_store, None, dead, "secret", COMMAND)

    for n in range(3):
        summary, blob_id = promoted(agent_store, BIG_TEXT + str(n))
        recorder.record_call("read_file", {"path": str(n)}, summary, [blob_id], False)
    log_path = recorder.log_path
    recorder.close()

    assert len(read_session_log(log_path).items()) == 6
    err = capsys.readouterr().err
    assert f"upload to {dead} failed" in err
    assert "retried with the next upload" in err
    assert f"the session log stays in {log_path}" in err


def test_a_blob_the_store_lost_is_said_once_and_the_log_still_goes(
    live_server, data_dir, token, agent_store, capsys
):
    lost = str(new_blob_id())  # never stored
    recorder = ProxyRecorder(agent_store, None, api_url(live_server), token[1], COMMAND)
    recorder.record_call("read_file", {"path": "x"}, f"[blob:{lost}] text | 9 lines", [lost], False)
    recorder.close()

    assert f"blob {lost} is not uploaded" in capsys.readouterr().err
    assert Item.objects.filter(session_id=recorder.session_id).count() == 2


def test_a_blob_over_the_servers_upload_limit_is_left_out_and_the_rest_goes(
    live_server, data_dir, token, agent_store, settings, capsys
):
    settings.BLOBVIEWER_UPLOAD_MAX_BYTES = 40_000
    big_summary, big_blob = promoted(agent_store, BIG_TEXT)  # about 60 KB
    small_summary, small_blob = promoted(agent_store, BIG_TEXT[:3000])
    recorder = ProxyRecorder(agent_store, None, api_url(live_server), token[1], COMMAND)

    recorder.record_call("read_file", {"path": "big"}, big_summary, [big_blob], False)
    recorder.record_call("read_file", {"path": "small"}, small_summary, [small_blob], False)
    recorder.close()

    assert f"blob {big_blob} is not uploaded: larger than the server takes" in (
        capsys.readouterr().err
    )
    assert Item.objects.filter(session_id=recorder.session_id).count() == 4
    assert blob_store().load_sync(small_blob) == Text(BIG_TEXT[:3000])
    assert Blob.objects.get(id=big_blob).missing
