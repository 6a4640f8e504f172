"""The demo run: real tools over this repository, a scripted model, readable output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.agent.history import AssistantMessage, ToolResult
from core.agent.session_log import read_session_log
from core.cli import main
from core.demo import DemoResult, report, run_demo
from core.inspect_tool import inspect_blob
from core.store import FsBlobStore, open_store
from core.store.blob_id import find_blob_refs

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(tmp_path_factory.mktemp("data"), repo_root=REPO_ROOT)


def test_each_session_writes_a_log_that_reads_back_to_its_items(demo: DemoResult) -> None:
    assert len(demo.sessions) >= 2
    for session in demo.sessions:
        assert session.log_path.parent == demo.data_dir / "sessions"
        log = read_session_log(session.log_path)
        assert log.id == session.session_id
        assert log.header["title"] == session.title
        assert log.items() == list(session.result.items)
        assert not log.torn_tail


def test_every_blob_the_logs_refer_to_is_in_the_store(demo: DemoResult) -> None:
    store = FsBlobStore(demo.data_dir / "blobs")
    referenced = set()
    for session in demo.sessions:
        for line in session.log_path.read_text().splitlines():
            referenced |= set(find_blob_refs(line))
    assert referenced == set(demo.blob_ids)
    for blob_id in referenced:
        store.load_sync(blob_id)  # raises if missing or damaged
    assert len(list((demo.data_dir / "blobs").iterdir())) == len(demo.blob_ids)


def test_the_history_is_much_smaller_than_the_tool_outputs(demo: DemoResult) -> None:
    assert demo.history_bytes * 3 < demo.output_bytes
    for session in demo.sessions:
        for item in session.result.items:
            if isinstance(item, ToolResult) and item.tool != "inspect" and not item.is_error:
                is_summary = item.output.startswith("[blob:")
                assert len(item.output.encode()) <= (400 if is_summary else 800)


def test_the_tour_reads_greps_lists_packages_and_inspects_with_every_selector_form(
    demo: DemoResult,
) -> None:
    tour = demo.sessions[0].result
    calls = [
        c for item in tour.items if isinstance(item, AssistantMessage) for c in item.tool_calls
    ]
    assert {"read_file", "grep", "list_dir", "installed_packages", "package_metadata"} <= {
        c.name for c in calls
    }
    selectors = [c.arguments.get("selector") for c in calls if c.name == "inspect"]
    assert None in selectors
    for form in ("lines:", "slice:", "key:", "grep:"):
        assert any(s and s.startswith(form) for s in selectors), form
    assert any(s and "|" in s for s in selectors)

    by_id = {item.call_id: item for item in tour.items if isinstance(item, ToolResult)}
    errors = [c.arguments.get("selector") for c in calls if by_id[c.id].is_error]
    assert errors == ["lines:ten-20"]  # the bad selector, shown on purpose
    assert tour.text and tour.stop_reason == "answered"


def test_the_packages_are_a_json_array_and_the_metadata_a_json_object(demo: DemoResult) -> None:
    store = FsBlobStore(demo.data_dir / "blobs")
    kinds = {store.load_sync(blob_id).kind for blob_id in demo.blob_ids}
    assert {"text", "json_array", "json_object"} <= kinds


def test_the_site_can_inspect_the_blobs(demo: DemoResult) -> None:
    store = FsBlobStore(demo.data_dir / "blobs")
    text_blob = next(b for b in demo.blob_ids if store.load_sync(b).kind == "text")
    assert inspect_blob(store, str(text_blob), "lines:1-3").startswith(
        f"[blob:{text_blob}] lines 1-3 of "
    )


def test_the_report_shows_bytes_kept_out_and_where_the_logs_are(demo: DemoResult) -> None:
    text = report(demo)
    kept = demo.output_bytes - demo.history_bytes
    assert f"({kept:,} kept out)" in text
    for session in demo.sessions:
        assert str(session.log_path) in text


def test_python_m_core_demo_runs_it_into_the_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "kept out" in out
    blob_id = find_blob_refs(out + "".join(p.read_text() for p in tmp_path.glob("sessions/*")))[0]
    assert main(["inspect", "--dir", str(tmp_path / "blobs"), str(blob_id)]) == 0
    assert capsys.readouterr().out.startswith(f"[blob:{blob_id}] ")
    logs = sorted((tmp_path / "sessions").glob("*.jsonl"))
    assert len(logs) >= 2
    header = json.loads(logs[0].read_text().splitlines()[0])
    assert header["model"] == "scripted-demo"


def test_the_demo_writes_its_blobs_into_the_store_it_is_given(tmp_path, s3_place) -> None:
    store = open_store(s3_place.url)
    result = run_demo(tmp_path / "data", repo_root=REPO_ROOT, store=store)

    assert result.blob_ids
    for blob_id in result.blob_ids:
        store.load_sync(blob_id)  # raises if missing or damaged
    assert not (tmp_path / "data" / "blobs").exists()
    assert f"in {s3_place.url}" in report(result).splitlines()[-1]
    for session in result.sessions:  # the logs stay in the data folder, as before
        assert session.log_path.parent == tmp_path / "data" / "sessions"
