"""Re-ingest that survives importer changes: items are keyed by their source records,
sessions record their importer version, and `manage.py ingest --rebuild` re-derives old
sessions in place, keeping seqs and unchanged blob ids."""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import uuid
from io import StringIO
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from blobviewer.ingest.importers import claude_code, load_recording
from blobviewer.models import BlobRef, IngestedFile, Item, Session
from importers.recordings import CLAUDE_CODE, SWE_AGENT_CLASSIC, claude_line, write_jsonl
from web.records import SampleSession

pytestmark = pytest.mark.django_db

TOKENS = ("input_tokens", "output_tokens", "context_tokens")
# The module, not the function of the same name that the package exports.
detect = importlib.import_module("blobviewer.ingest.importers.detect")
# The Claude Code importer's version as this suite starts (tests bump it past this).
CLAUDE_VERSION = claude_code.IMPORTER_VERSION


def ingest(*args: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("ingest", *[str(a) for a in args], stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def blob_files(data_dir: Path) -> set[str]:
    return {p.name for p in (data_dir / "blobs").iterdir()}


def refs_by_seq(session_id: Any) -> dict[int, set[uuid.UUID]]:
    refs: dict[int, set[uuid.UUID]] = {}
    for seq, blob_id in BlobRef.objects.filter(session_id=session_id).values_list(
        "item__seq", "blob_id"
    ):
        refs.setdefault(seq, set()).add(blob_id)
    return refs


def items_by_seq(session_id: Any) -> dict[int, Item]:
    return {item.seq: item for item in Item.objects.filter(session_id=session_id)}


def make_it_old(session_id: Any, path: Path) -> None:
    """Turn a session into what the importer before versions left: version 0, no tokens,
    durations or facts, and each item's digest taken over the importer's output."""
    for record in load_recording(path).records:
        old = {k: v for k, v in record.items() if k != "source_digest" and k not in TOKENS}
        digest = hashlib.sha256(orjson.dumps(old, option=orjson.OPT_SORT_KEYS)).hexdigest()
        Item.objects.filter(session_id=session_id, seq=record["seq"]).update(digest=digest)
    Item.objects.filter(session_id=session_id).update(
        input_tokens=None, output_tokens=None, context_tokens=None, duration=None
    )
    Session.objects.filter(id=session_id).update(
        importer_version=0, step_count=0, error_count=0, status="", started_at=None
    )
    IngestedFile.objects.all().delete()  # that importer's ingest left marks of its own shape


@pytest.fixture
def claude(tmp_path: Path, data_dir: Path) -> Path:
    """The real Claude Code recording, copied (fixtures are read-only), and ingested."""
    path = tmp_path / CLAUDE_CODE.name
    shutil.copyfile(CLAUDE_CODE, path)
    ingest(path)
    return path


def claude_session() -> Session:
    return Session.objects.get(id=claude_code_id())


def claude_code_id() -> uuid.UUID:
    return uuid.UUID(load_recording(CLAUDE_CODE).header["id"])


def bump(monkeypatch: pytest.MonkeyPatch, change: Any = None) -> None:
    """A new Claude Code importer: the next version, deriving what *change* makes of the
    current version's records."""
    monkeypatch.setattr(claude_code, "IMPORTER_VERSION", CLAUDE_VERSION + 1)
    if change is not None:
        original = claude_code.load

        def load(path: Path, data: bytes, carry: Any = None) -> Any:
            recording = original(path, data, carry)
            recording.records = change(recording.records)
            return recording

        monkeypatch.setattr(claude_code, "load", load)


def big_result_seqs(session_id: Any) -> list[int]:
    return sorted(
        Item.objects.filter(session_id=session_id, type="tool_result", blob_refs__isnull=False)
        .exclude(tool="inspect")
        .values_list("seq", flat=True)
    )


# --- a plain ingest --------------------------------------------------------------------------


def test_a_plain_reingest_of_an_unchanged_recording_adds_nothing(claude, data_dir) -> None:
    session = claude_session()
    before = list(Item.objects.order_by("seq").values_list("pk", "seq", "digest", *TOKENS))
    blobs = blob_files(data_dir)
    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing

    out, err = ingest(claude)

    assert "+0 items" in out and err == ""
    assert list(Item.objects.order_by("seq").values_list("pk", "seq", "digest", *TOKENS)) == before
    assert blob_files(data_dir) == blobs
    assert Session.objects.get(id=session.id).importer_version == CLAUDE_VERSION


def test_items_are_keyed_by_their_source_records_not_by_the_importers_output(
    claude, data_dir, monkeypatch
) -> None:
    # The same importer version deriving other outputs from the same lines is still the
    # same recording: nothing "differs", nothing is appended.
    def louder(records: list[dict]) -> list[dict]:
        return [
            {**r, "output": r["output"].upper()} if r["type"] == "tool_result" else r
            for r in records
        ]

    monkeypatch.setattr(claude_code, "load", _wrapped(claude_code.load, louder))
    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing

    out, err = ingest(claude)

    assert "+0 items" in out and err == ""


def _wrapped(load: Any, change: Any) -> Any:
    def wrapped(path: Path, data: bytes, carry: Any = None) -> Any:
        recording = load(path, data, carry)
        recording.records = change(recording.records)
        return recording

    return wrapped


def test_a_plain_ingest_of_an_older_versions_session_appends_nothing_and_says_to_rebuild(
    claude, data_dir
) -> None:
    session_id = claude_code_id()
    make_it_old(session_id, claude)
    count = Item.objects.count()
    with claude.open("a") as log:  # the recording grew meanwhile
        log.write(json.dumps(claude_line("user", "one more thing")) + "\n")

    out, err = ingest(claude)  # no CommandError: not a failure of the run

    lines = [line for line in out.splitlines() if "--rebuild" in line]
    assert len(lines) == 1
    assert str(claude) in lines[0] and str(session_id) in lines[0]
    assert f"older claude_code importer (version 0; this is version {CLAUDE_VERSION})" in lines[0]
    assert err == ""
    assert Item.objects.count() == count
    assert "0 of 1 files ingested (1 skipped: recorded by another importer version)" in out


def test_a_plain_ingest_of_an_old_session_among_others_still_ingests_the_others(
    claude, tmp_path, data_dir
) -> None:
    make_it_old(claude_code_id(), claude)
    other = tmp_path / "more" / SWE_AGENT_CLASSIC.name
    other.parent.mkdir()
    shutil.copyfile(SWE_AGENT_CLASSIC, other)

    out, _ = ingest(claude, other)

    assert Session.objects.count() == 2
    assert "1 of 2 files ingested" in out


# --- a rebuild -------------------------------------------------------------------------------


def test_a_rebuild_fills_in_what_an_old_session_lacks_and_keeps_its_blobs_and_seqs(
    claude, data_dir
) -> None:
    session_id = claude_code_id()
    make_it_old(session_id, claude)
    refs, blobs = refs_by_seq(session_id), blob_files(data_dir)
    seqs = set(items_by_seq(session_id))
    pks = {seq: item.pk for seq, item in items_by_seq(session_id).items()}
    assert not Item.objects.filter(input_tokens__isnull=False).exists()

    out, err = ingest("--rebuild", claude)

    assert err == ""
    assert f"rebuilt: {len(seqs)} items re-derived, +0 new, 0 no longer derived" in out
    assert f"{len(refs)} blobs kept, 0 new" in out
    session = Session.objects.get(id=session_id)
    assert session.importer_version == CLAUDE_VERSION
    assert session.step_count > 0 and session.started_at is not None
    # New fields appear; every item keeps its seq (and row), every blob its id.
    assert Item.objects.filter(session=session, input_tokens__gt=0).exists()
    assert {seq: item.pk for seq, item in items_by_seq(session_id).items()} == pks
    assert refs_by_seq(session_id) == refs
    assert blob_files(data_dir) == blobs
    # The digests are the source records' now, so a plain ingest again finds nothing new.
    IngestedFile.objects.all().delete()  # read again: ingest itself must add nothing
    out, err = ingest(claude)
    assert "+0 items" in out and err == ""


def test_a_rebuild_stores_a_new_blob_only_for_an_output_that_changed(
    claude, data_dir, monkeypatch
) -> None:
    session_id = claude_code_id()
    changed_seq = big_result_seqs(session_id)[3]
    refs, blobs = refs_by_seq(session_id), blob_files(data_dir)

    def fuller(records: list[dict]) -> list[dict]:
        return [
            {**r, "output": r["output"] + "\n(the rest of the output)"}
            if r["seq"] == changed_seq
            else r
            for r in records
        ]

    bump(monkeypatch, fuller)

    out, _ = ingest("--rebuild", claude)

    assert f"{len(refs) - 1} blobs kept, 1 new" in out
    after = refs_by_seq(session_id)
    assert {s: r for s, r in after.items() if s != changed_seq} == {
        s: r for s, r in refs.items() if s != changed_seq
    }
    (new_blob,) = after[changed_seq]
    assert after[changed_seq] != refs[changed_seq]
    # One new blob file; the old one stays, so a link to it keeps working.
    assert blob_files(data_dir) - blobs == {f"{new_blob}.txt"}
    assert blobs <= blob_files(data_dir)
    item = Item.objects.get(session_id=session_id, seq=changed_seq)
    assert item.output.startswith(f"[blob:{new_blob}]")
    assert Session.objects.get(id=session_id).importer_version == CLAUDE_VERSION + 1


def test_an_item_the_new_importer_no_longer_derives_leaves_a_gap_and_new_ones_go_last(
    claude, data_dir, monkeypatch
) -> None:
    session_id = claude_code_id()
    before = items_by_seq(session_id)
    last = max(before)
    dropped = 5
    grown = json.loads(claude.read_text().splitlines()[10])  # any line: a new source record

    def other(records: list[dict]) -> list[dict]:
        kept = [r for r in records if r["seq"] != dropped]
        note = {
            "type": "user",
            "seq": len(records) + 1,
            "at": None,
            "text": "a note the new importer adds",
            "role": "note",
            "source_digest": hashlib.sha256(json.dumps(grown).encode()).hexdigest(),
        }
        return [*kept[:10], note, *kept[10:]]  # where its source line is

    bump(monkeypatch, other)

    out, _ = ingest("--rebuild", claude)

    assert "+1 new, 1 no longer derived" in out
    after = items_by_seq(session_id)
    assert dropped not in after
    assert set(after) == (set(before) - {dropped}) | {last + 1}
    assert after[last + 1].text == "a note the new importer adds"
    for seq in set(before) - {dropped}:  # the same item under the same seq
        assert (after[seq].pk, after[seq].type, after[seq].call_id) == (
            before[seq].pk,
            before[seq].type,
            before[seq].call_id,
        )
    session = Session.objects.get(id=session_id)
    assert session.item_count == len(before)

    # The recording grows after the rebuild: its new items go after the largest seq.
    with claude.open("a") as log:
        log.write(json.dumps(claude_line("user", "and one more")) + "\n")
    out, err = ingest(claude)
    assert err == "" and "+1 items" in out
    newest = Item.objects.get(session_id=session_id, seq=last + 2)
    assert newest.text == "and one more"


def test_a_rebuild_of_an_up_to_date_session_changes_nothing(claude, data_dir) -> None:
    before = list(Item.objects.order_by("seq").values_list("pk", "seq", "digest", "output"))

    out, _ = ingest("--rebuild", claude)

    assert "rebuilt" not in out and "+0 items" in out
    assert list(Item.objects.order_by("seq").values_list("pk", "seq", "digest", "output")) == (
        before
    )


def test_a_rebuild_refuses_another_recording_that_claims_the_session(
    tmp_path, data_dir, monkeypatch
) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [claude_line("user", "the real run")])
    ingest(first)
    impostor = write_jsonl(tmp_path / "b.jsonl", [claude_line("user", "someone else's run")])
    bump(monkeypatch)

    with pytest.raises(CommandError):
        ingest("--rebuild", impostor)

    item = Item.objects.get()
    assert item.text == "the real run"
    assert Session.objects.get().importer_version == CLAUDE_VERSION


def test_rebuild_all_rederives_each_old_session_from_its_recording(
    claude, tmp_path, data_dir
) -> None:
    traj = tmp_path / SWE_AGENT_CLASSIC.name
    shutil.copyfile(SWE_AGENT_CLASSIC, traj)
    ingest(traj)
    traj_session = Session.objects.get(source_format="swe_agent")
    make_it_old(claude_code_id(), claude)
    make_it_old(traj_session.id, traj)
    traj.unlink()  # its recording is gone
    traj_items = list(Item.objects.filter(session=traj_session).values_list("pk", "output"))

    out, err = ingest("--rebuild", "--all")  # no CommandError: a gone recording is no failure

    assert err == ""
    assert Session.objects.get(id=claude_code_id()).importer_version == CLAUDE_VERSION
    gone = [line for line in out.splitlines() if str(traj_session.id) in line]
    assert len(gone) == 1 and "is gone; kept as it is" in gone[0] and str(traj) in gone[0]
    kept = Session.objects.get(id=traj_session.id)
    assert kept.importer_version == 0
    assert list(Item.objects.filter(session=kept).values_list("pk", "output")) == traj_items


def test_all_goes_with_rebuild(data_dir) -> None:
    with pytest.raises(CommandError, match="--all goes with --rebuild"):
        ingest("--all")


# --- our own logs and the upload API ----------------------------------------------------------


def test_our_own_logs_rebuild_in_place_under_their_own_seqs(
    sample_session: SampleSession, data_dir, monkeypatch
) -> None:
    refs, blobs = refs_by_seq(sample_session.id), blob_files(data_dir)
    pks = {seq: item.pk for seq, item in items_by_seq(sample_session.id).items()}
    monkeypatch.setattr(detect, "OUR_IMPORTER_VERSION", 2)

    out, _ = ingest(sample_session.path)
    assert "older blobviewer importer (version 1; this is version 2)" in out

    out, _ = ingest("--rebuild", sample_session.path)
    assert "rebuilt: 9 items re-derived, +0 new, 0 no longer derived" in out
    assert Session.objects.get(id=sample_session.id).importer_version == 2
    assert {seq: item.pk for seq, item in items_by_seq(sample_session.id).items()} == pks
    assert refs_by_seq(sample_session.id) == refs
    assert blob_files(data_dir) == blobs


def test_an_upload_to_a_session_of_another_importer_version_is_a_409_with_the_line(
    client, api_token, sample_log: SampleSession, data_dir, monkeypatch
) -> None:
    _, secret = api_token
    log = sample_log.path.read_bytes()
    headers = {"Authorization": f"Bearer {secret}"}
    sent = client.post(
        "/api/sessions",
        data={"log": SimpleUploadedFile("s.jsonl", log)},
        headers=headers,
    )
    assert sent.status_code == 201, sent.content
    monkeypatch.setattr(detect, "OUR_IMPORTER_VERSION", 2)

    again = client.post(
        "/api/sessions",
        data={"log": SimpleUploadedFile("s.jsonl", log)},
        headers=headers,
    )

    assert again.status_code == 409
    body = again.content.decode()
    assert body.count("\n") == 1 and "manage.py ingest --rebuild" in body
    assert str(data_dir) not in body
    assert Session.objects.get(id=sample_log.id).importer_version == 1
