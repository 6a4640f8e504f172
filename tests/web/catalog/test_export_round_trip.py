"""An export made with --inline-blobs, ingested again into a fresh store, gives the same
session title and, step by step, the same tools, arguments and outputs, byte for byte
(an output promoted on either side compared by its blob's whole content: the ingest of
the export promotes it again, to a new blob id)."""

from __future__ import annotations

import importlib.util
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from blobviewer.catalog.export_walk import loaded_units, promoted_blob, session_units
from blobviewer.data_dir import blob_store
from blobviewer.models import Session

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        importlib.util.find_spec("blobviewer.ingest.importers.atif") is None,
        reason="the ATIF importer (blobviewer/ingest/importers/atif.py) has not landed yet",
    ),
]

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
RECORDINGS = [
    REAL / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl",  # Claude Code, 57 promoted outputs
    REAL / "claude_code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    REAL / "codex" / "codex_golden.jsonl",
    REAL / "gemini" / "gemini_golden.json",
    REAL / "pydicom__pydicom-1458.traj",
]


def steps_of(session: Session) -> list[tuple[str, Any, str, str]]:
    """Each step of the session's timeline: its tool, its call's arguments, its output (a
    promoted one: the whole content of its blob), and its result's title."""
    store = blob_store()
    steps = []
    for loaded in loaded_units(session, session_units(session)):
        for step in loaded.unit.steps:
            assistant = loaded.item_of(step, result=False)
            arguments = None
            if assistant is not None and step.call is not None:
                arguments = assistant.tool_calls[step.call.index].get("arguments")
            result = loaded.item_of(step, result=True)
            output = title = ""
            if result is not None:
                title = result.title
                blob_id = promoted_blob(result)
                output = result.output
                if blob_id is not None:
                    with store.open_sync(blob_id) as blob:
                        output = blob.read(0, blob.size).decode("utf-8", "surrogatepass")
            steps.append((step.tool, arguments, output, title))
    return steps


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda path: path.name)
def test_an_export_with_inline_blobs_imports_as_the_same_steps(
    recording, data_dir, settings, tmp_path
):
    call_command("ingest", str(recording), stdout=StringIO())
    original = Session.objects.get()
    title, before = original.title, steps_of(original)
    assert before  # every one of these recordings has steps
    (tmp_path / "export").mkdir()
    exported = tmp_path / "export" / "trajectory.json"
    call_command("sessions", "export", str(original.id), "--inline-blobs", "-o", str(exported))

    # A fresh store, and no trace of the session in the database.
    original.delete()
    fresh = tmp_path / "fresh"
    (fresh / "blobs").mkdir(parents=True)
    (fresh / "sessions").mkdir()
    settings.BLOBVIEWER_DATA = fresh
    call_command("ingest", str(exported), stdout=StringIO())

    imported = Session.objects.get()
    assert imported.source_format == "atif"
    assert imported.title == title
    after = steps_of(imported)
    assert [step[0] for step in after] == [step[0] for step in before]
    assert [step[1] for step in after] == [step[1] for step in before]
    assert after == before
