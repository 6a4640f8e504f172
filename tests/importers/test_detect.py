from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from blobviewer.ingest.importers import RecordingError, load_recording
from blobviewer.ingest.importers.detect import detect
from importers.recordings import CLAUDE_CODE, MINI_SWE_AGENT, SWE_AGENT_CLASSIC, write_json


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (CLAUDE_CODE, "claude_code"),
        (MINI_SWE_AGENT, "openai_chat"),
        (SWE_AGENT_CLASSIC, "swe_agent"),
    ],
)
def test_it_recognises_each_fixture_by_content_not_name(
    fixtures_dir: Path, tmp_path: Path, fixture: Path, expected: str
) -> None:
    renamed = tmp_path / "recording.txt"
    shutil.copyfile(fixture, renamed)
    assert detect(renamed, renamed.read_bytes()) == expected
    assert load_recording(renamed).format == expected


def test_it_recognises_our_own_session_log(tmp_path: Path) -> None:
    log = tmp_path / "x.json"
    log.write_text('{"type": "session", "id": "0190f5e2-0000-7000-8000-000000000000"}\n')
    assert detect(log, log.read_bytes()) == "blobviewer"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"hello world\n", "neither JSON nor JSON Lines"),
        (b'{"some": "object"}', "unknown recording format"),
        (b'{"a": 1}\n{"b": 2}\n', "JSON Lines of an unknown kind"),
        (b"[1, 2, 3]", "unknown recording format"),
    ],
)
def test_it_names_the_file_when_the_format_is_unknown(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "mystery.json"
    path.write_bytes(content)
    with pytest.raises(RecordingError) as error:
        load_recording(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)


def test_a_missing_file_is_a_recording_error(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="cannot read"):
        load_recording(tmp_path / "absent.json")


def test_a_damaged_openai_document_names_the_message(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "chat.json",
        [{"role": "user", "content": "hi"}, {"role": "tool", "content": "no call id"}],
    )
    with pytest.raises(RecordingError, match=r"messages\[1\] is a tool result without"):
        load_recording(path)
