"""`manage.py prune --older-than AGE [--dry-run]`: retention, with tombstones and 410s."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import uuid6
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from blobviewer.catalog import blobs as catalog
from blobviewer.catalog import retention
from blobviewer.catalog.retention import PruneReport, RetentionError, parse_older_than, prune
from blobviewer.data_dir import renderings
from blobviewer.ingest import sessions as ingest_module
from blobviewer.ingest.errors import SessionPruned
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import (
    ApiToken,
    Blob,
    BlobRef,
    Item,
    PrunedBlob,
    PrunedSession,
    SearchChunk,
    SearchedBlob,
    Session,
    ShareLink,
)
from blobviewer.search.indexing import index_pending_blobs
from core.content import Structured, Text
from core.store import FsBlobStore
from core.store.blob_id import BlobId, blob_created_at
from web.records import header, tool_result_item, user_item

pytestmark = pytest.mark.django_db

NINETY_DAYS = timedelta(days=90)


def days_ago(days: float) -> datetime:
    return timezone.now() - timedelta(days=days)


def blob_id_made_at(moment: datetime) -> BlobId:
    """A UUID v7 whose timestamp is *moment*: a blob an agent wrote back then."""
    milliseconds = int(moment.timestamp() * 1000)
    fresh = uuid6.uuid7().int
    return uuid.UUID(int=(fresh & ((1 << 80) - 1)) | (milliseconds << 80))


@pytest.fixture
def blob_at(store: FsBlobStore) -> Callable[..., BlobId]:
    """Store a blob made *days* ago (text, or a JSON value with `value=`)."""

    def make(days: float, text: str = "a stored output\n" * 60, *, value: Any = None) -> BlobId:
        blob_id = blob_id_made_at(days_ago(days))
        content = Text(text) if value is None else Structured(value)
        assert store.put_sync(blob_id, content)
        return blob_id

    return make


@pytest.fixture
def record(data_dir: Path, store: FsBlobStore) -> Callable[..., Session]:
    """Record a session whose items and last ingest are *days* ago, referencing *blobs*;
    its log is written to `<data>/sessions/<id>.jsonl`, or into *folder*."""

    def make(
        days: float,
        *,
        blobs: tuple[BlobId, ...] = (),
        title: str = "a run",
        folder: Path | None = None,
        item_days: float | None = None,
    ) -> Session:
        session_id = uuid.uuid4()
        at = days_ago(days if item_days is None else item_days).isoformat()
        records: list[dict[str, Any]] = [
            header(session_id, title=title, created_at=days_ago(days).isoformat()),
            {**user_item(1, "run the tools"), "at": at},
        ]
        for seq, blob_id in enumerate(blobs, start=2):
            output = f"[blob:{blob_id}] text, 60 lines\nfirst lines ..."
            records.append({**tool_result_item(seq, output, call_id=f"c{seq}"), "at": at})
        folder = folder or data_dir / "sessions"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{session_id}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        ingest_file(path, store=store)
        # The last ingest, as if it had happened back then (update() skips auto_now).
        Session.objects.filter(id=session_id).update(updated_at=days_ago(days))
        return Session.objects.get(id=session_id)

    return make


def run_prune(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("prune", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def log_of(session: Session, data_dir: Path) -> Path:
    return data_dir / "sessions" / f"{session.id}.jsonl"


def files_under(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): path.stat().st_size
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "db.sqlite3"
    }


def share(blob_id: BlobId, user: Any) -> ShareLink:
    return ShareLink.objects.create(blob_id=blob_id, selector="lines:1-3", created_by=user)


# --- what goes -----------------------------------------------------------------------------


def test_it_deletes_an_idle_session_with_its_items_log_and_blobs(record, blob_at, data_dir, store):
    output = blob_at(200)
    old = record(120, blobs=(output,))
    log = log_of(old, data_dir)
    assert log.exists() and Item.objects.filter(session=old).count() == 2

    report = prune(older_than=NINETY_DAYS)

    assert not Session.objects.filter(id=old.id).exists()
    assert not Item.objects.filter(session_id=old.id).exists()
    assert not BlobRef.objects.exists()
    assert not log.exists()
    assert not store.exists_sync(output)
    assert not Blob.objects.filter(id=output).exists()
    assert (report.sessions, report.items, report.blobs) == (1, 2, 1)


def test_a_pruned_blob_takes_its_rendering_and_index_files_along(
    record, blob_at, data_dir, store, monkeypatch
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    big = blob_at(200, value=[{"n": n, "label": f"entry {n}"} for n in range(50)])
    kept = blob_at(200, value=[{"n": n} for n in range(50)])
    record(120, blobs=(big,))
    record(5, blobs=(kept,))
    rendered = renderings()
    assert rendered.exists_sync(big) and rendered.exists_sync(kept)
    index = store.root / ".index"
    index.mkdir()
    for blob_id in (big, kept):
        (index / f"{blob_id}.idx").write_bytes(b"\x00" * 96)  # (a damaged one: still its index)
    # A rendering has its own line index beside it, in derived/.index/ (core.store.index).
    rendering_index = rendered.root / ".index"
    assert list(rendering_index.glob(f"{big}*")) and list(rendering_index.glob(f"{kept}*"))
    derived_bytes = rendered.size_sync(big) + 96
    derived_bytes += sum(path.stat().st_size for path in rendering_index.glob(f"{big}*"))

    report = prune(older_than=NINETY_DAYS)

    assert not rendered.exists_sync(big)
    assert not list(index.glob(f"{big}*"))
    assert not list(rendering_index.glob(f"{big}*"))
    assert list(rendering_index.glob(f"{kept}*"))
    assert rendered.exists_sync(kept)
    assert sorted(p.name for p in index.glob(f"{kept}*")) == [f"{kept}.idx"]
    assert report.derived_bytes == derived_bytes


def test_the_report_says_what_was_freed(record, blob_at, data_dir, store):
    outputs = (blob_at(300), blob_at(250, "another output\n" * 99))
    unreferenced = blob_at(100, value={"left": "behind"})
    sessions = [record(150, blobs=outputs), record(95)]
    blob_bytes = sum(store.size_sync(b) for b in (*outputs, unreferenced))
    log_bytes = sum(log_of(s, data_dir).stat().st_size for s in sessions)

    out, err = run_prune("--older-than", "90d")

    assert err == ""
    assert "pruned 2 sessions (4 items) and 3 blobs" in out
    assert (
        f"freed {blob_bytes + log_bytes:,} bytes: {blob_bytes:,} of blob files, "
        f"{log_bytes:,} of session logs, 0 of derived files"
    ) in out


def test_it_counts_a_session_idle_since_its_last_ingest_even_with_items_without_times(
    record, data_dir
):
    old = record(120)
    Item.objects.filter(session=old).update(at=None)

    report = prune(older_than=NINETY_DAYS)

    assert report.session_ids == (old.id,)


# --- what stays ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ingested", "item_recorded"),
    [(10, 10), (10, 200), (200, 10)],
    ids=["all-recent", "ingested-recently", "item-recorded-recently"],
)
def test_it_keeps_a_session_with_activity_inside_the_period(
    record, blob_at, data_dir, store, ingested, item_recorded
):
    output = blob_at(300)
    session = record(ingested, blobs=(output,), item_days=item_recorded)

    report = prune(older_than=NINETY_DAYS)

    assert report.sessions == 0 and report.blobs == 0
    assert Session.objects.filter(id=session.id).exists()
    assert Item.objects.filter(session=session).count() == 2
    assert log_of(session, data_dir).exists()
    assert store.exists_sync(output)
    assert not PrunedSession.objects.exists() and not PrunedBlob.objects.exists()


def test_it_keeps_an_old_blob_that_a_kept_session_still_references(record, blob_at, store):
    shared_output = blob_at(200)
    own_output = blob_at(200, "only the old run's\n" * 80)
    old = record(120, blobs=(shared_output, own_output))
    recent = record(3, blobs=(shared_output,))

    report = prune(older_than=NINETY_DAYS)

    assert report.session_ids == (old.id,)
    assert report.blob_ids == (own_output,)
    assert store.exists_sync(shared_output)
    assert BlobRef.objects.filter(session=recent, blob_id=shared_output).exists()
    assert not Blob.objects.get(id=shared_output).missing
    assert not PrunedBlob.objects.filter(id=shared_output).exists()


def test_it_removes_old_unreferenced_blobs_and_keeps_fresh_ones(record, blob_at, store):
    old_unreferenced = blob_at(91)
    fresh_unreferenced = blob_at(89)
    # Written by an agent moments ago for a log that is not here yet; its session is old.
    fresh_of_old_session = blob_at(0.001)
    just_written = store.store_sync(Text("a brand new output\n" * 70))
    record(120, blobs=(fresh_of_old_session,))

    report = prune(older_than=NINETY_DAYS)

    assert report.blob_ids == (old_unreferenced,)
    assert not store.exists_sync(old_unreferenced)
    for blob_id in (fresh_unreferenced, fresh_of_old_session, just_written):
        assert store.exists_sync(blob_id)
        assert not PrunedBlob.objects.filter(id=blob_id).exists()


def test_it_keeps_a_blob_whose_id_tells_no_time(store, data_dir):
    blob_id = uuid.uuid4()
    store.put_sync(blob_id, Text("no creation time in a v4 id\n"))
    assert blob_created_at(blob_id) is None

    prune(older_than=timedelta(minutes=1))

    assert store.exists_sync(blob_id)


def test_it_never_deletes_a_recording_outside_the_sessions_folder(record, tmp_path, data_dir):
    runs = tmp_path / "runs"
    session = record(120, folder=runs)
    recording = runs / f"{session.id}.jsonl"
    assert Session.objects.get(id=session.id).source_path == str(recording)

    report = prune(older_than=NINETY_DAYS)

    assert report.session_ids == (session.id,)
    assert recording.exists()
    assert report.log_bytes == 0


def test_a_session_that_grows_while_prune_runs_is_kept(record, blob_at, store, monkeypatch):
    output = blob_at(200)
    session = record(120, blobs=(output,))
    log = Path(session.source_path)
    stale_blobs = retention._stale_blobs

    def an_agent_appends_meanwhile(*args: Any, **kwargs: Any) -> list[BlobId]:
        # prune has picked its sessions; the run goes on before it deletes anything.
        with log.open("a", encoding="utf-8") as file:
            file.write(json.dumps(user_item(9, "still running")) + "\n")
        ingest_file(log, store=store)
        return stale_blobs(*args, **kwargs)

    monkeypatch.setattr(retention, "_stale_blobs", an_agent_appends_meanwhile)

    report = prune(older_than=NINETY_DAYS)

    assert report.sessions == 0 and report.items == 0 and report.log_bytes == 0
    assert Session.objects.get(id=session.id).item_count == 3
    assert log.exists()
    assert store.exists_sync(output)
    assert not PrunedSession.objects.exists() and not PrunedBlob.objects.exists()


def test_an_ingest_overtaken_by_a_prune_does_not_bring_the_session_back(
    record, tmp_path, store, monkeypatch
):
    session = record(120, folder=tmp_path / "runs")
    log = Path(session.source_path)
    with log.open("a", encoding="utf-8") as file:
        file.write(json.dumps(tool_result_item(2, "x" * 5000)) + "\n")  # promoted on the way
    catalog_blobs = ingest_module.catalog_blobs

    def prune_meanwhile(*args: Any, **kwargs: Any) -> Any:
        # The ingest has checked for a tombstone and stored its blob; prune runs now.
        prune(older_than=NINETY_DAYS)
        return catalog_blobs(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "catalog_blobs", prune_meanwhile)
    blobs_before = set(store.ids_sync())

    with pytest.raises(SessionPruned):
        ingest_file(log, store=store)

    assert not Session.objects.filter(id=session.id).exists()
    assert PrunedSession.objects.filter(id=session.id).exists()
    assert set(store.ids_sync()) <= blobs_before  # its promoted output was discarded


# --- tombstones ----------------------------------------------------------------------------


def test_each_pruned_session_and_blob_leaves_a_tombstone(record, blob_at):
    output = blob_at(200)
    unreferenced = blob_at(150)
    old = record(120, blobs=(output,), title="Migrate the billing tables")
    before = timezone.now()

    prune(older_than=NINETY_DAYS)

    tombstone = PrunedSession.objects.get()
    assert (tombstone.id, tombstone.title) == (old.id, "Migrate the billing tables")
    assert before <= tombstone.pruned_at <= timezone.now()
    assert set(PrunedBlob.objects.values_list("id", flat=True)) == {output, unreferenced}


def test_a_pruned_blob_keeps_its_row_only_for_its_share_links(record, blob_at, user):
    shared = blob_at(200)
    unshared = blob_at(200, "nobody shared this\n" * 70)
    record(120, blobs=(shared, unshared))
    link = share(shared, user)

    prune(older_than=NINETY_DAYS)

    assert not Blob.objects.filter(id=unshared).exists()
    row = Blob.objects.get(id=shared)
    assert row.missing and row.size is None and row.count is None
    assert ShareLink.objects.filter(pk=link.pk).exists()


def test_a_pruned_blob_can_no_longer_be_found_by_search(record, blob_at, user, store):
    shared = blob_at(200, "a needle in the haystack\n" * 40)
    unshared = blob_at(200, "another needle\n" * 60)
    record(120, blobs=(shared, unshared))
    share(shared, user)
    index_pending_blobs(store=store)
    assert SearchChunk.objects.filter(blob_id__in=[shared, unshared]).count() >= 2

    prune(older_than=NINETY_DAYS)

    assert not SearchChunk.objects.filter(blob_id__in=[shared, unshared]).exists()
    assert not SearchedBlob.objects.filter(blob_id__in=[shared, unshared]).exists()
    assert not SearchChunk.objects.filter(text__contains="needle").exists()


def test_pruning_again_frees_nothing_more_and_keeps_the_dates(record, blob_at, user):
    shared = blob_at(200)
    record(120, blobs=(shared,))
    share(shared, user)
    prune(older_than=NINETY_DAYS)
    first = {t.id: t.pruned_at for t in PrunedBlob.objects.all()}

    report = prune(older_than=NINETY_DAYS)

    assert (report.sessions, report.blobs, report.total_bytes) == (0, 0, 0)
    assert {t.id: t.pruned_at for t in PrunedBlob.objects.all()} == first


# --- share links and blob pages ------------------------------------------------------------


def test_a_share_link_to_a_pruned_blob_answers_410_with_the_date(record, blob_at, user, client):
    output = blob_at(200)
    record(120, blobs=(output,))
    link = share(output, user)
    assert client.get(reverse("share_detail", args=[link.token])).status_code == 200

    prune(older_than=NINETY_DAYS)

    day = PrunedBlob.objects.get(id=output).pruned_at.strftime("%Y-%m-%d")
    page = client.get(reverse("share_detail", args=[link.token]))
    assert page.status_code == 410
    assert "This blob was deleted by retention on" in page.content.decode()
    assert day in page.content.decode()
    raw = client.get(reverse("share_raw", args=[link.token]))
    assert raw.status_code == 410
    assert "deleted by retention" in raw.content.decode()


def test_a_revoked_link_to_a_pruned_blob_still_just_says_revoked(record, blob_at, user, client):
    output = blob_at(200)
    record(120, blobs=(output,))
    link = share(output, user)
    ShareLink.objects.filter(pk=link.pk).update(revoked_at=timezone.now())
    prune(older_than=NINETY_DAYS)

    page = client.get(reverse("share_detail", args=[link.token]))

    assert page.status_code == 410
    assert "revoked" in page.content.decode()
    assert "retention" not in page.content.decode()


def test_the_blob_page_of_a_pruned_blob_says_it_was_deleted(record, blob_at, logged_in_client):
    output = blob_at(200)
    record(120, blobs=(output,))
    prune(older_than=NINETY_DAYS)
    day = PrunedBlob.objects.get(id=output).pruned_at.strftime("%Y-%m-%d")

    for name in ("blob_detail", "blob_raw"):
        response = logged_in_client.get(reverse(name, args=[output]))
        assert response.status_code == 410
        assert "deleted by retention on" in response.content.decode()
        assert day in response.content.decode()


def test_a_pruned_blob_put_back_into_the_store_shows_again(
    record, blob_at, store, logged_in_client
):
    output = blob_at(200)
    record(120, blobs=(output,))
    prune(older_than=NINETY_DAYS)

    store.put_sync(output, Text("restored from a backup\n"))

    assert logged_in_client.get(reverse("blob_detail", args=[output])).status_code == 200


# --- ingest after a prune ------------------------------------------------------------------


def test_ingesting_a_pruned_session_again_is_skipped_with_one_line(record, tmp_path):
    session = record(120, folder=tmp_path / "runs")
    recording = Path(session.source_path)
    prune(older_than=NINETY_DAYS)
    day = PrunedSession.objects.get().pruned_at.strftime("%Y-%m-%d")

    out, err = StringIO(), StringIO()
    call_command("ingest", str(recording), stdout=out, stderr=err)

    expected = (
        f"{recording}: skipped: session {session.id} was pruned on {day}; "
        "use --force to ingest it again"
    )
    skipped = [line for line in out.getvalue().splitlines() if "skipped" in line]
    assert len(skipped) == 2  # the file's line and the total's note
    assert skipped[0].endswith(expected)
    assert "0 of 1 files ingested (1 skipped: pruned sessions)" in skipped[1]
    assert err.getvalue() == ""
    assert not Session.objects.filter(id=session.id).exists()
    assert PrunedSession.objects.filter(id=session.id).exists()


def test_force_ingests_a_pruned_session_again_and_drops_its_tombstone(record, tmp_path):
    session = record(120, folder=tmp_path / "runs")
    prune(older_than=NINETY_DAYS)

    call_command("ingest", "--force", session.source_path, stdout=StringIO())

    again = Session.objects.get(id=session.id)
    assert again.item_count == 1
    assert not PrunedSession.objects.exists()


def test_an_ingest_that_fails_keeps_the_tombstone_even_when_forced(record, tmp_path, store):
    session = record(120, folder=tmp_path / "runs")
    prune(older_than=NINETY_DAYS)
    recording = Path(session.source_path)
    lines = recording.read_text().splitlines(keepends=True)
    recording.write_text(lines[0] + lines[1] + lines[1])  # seq 1 twice

    with pytest.raises(CommandError):
        call_command("ingest", "--force", str(recording), stdout=StringIO(), stderr=StringIO())

    assert PrunedSession.objects.filter(id=session.id).exists()


# --- uploads after a prune -----------------------------------------------------------------


@pytest.fixture
def secret(api_token: tuple[ApiToken, str]) -> str:
    return api_token[1]


def upload(client: Any, secret: str, log: bytes, *blobs: tuple[str, bytes]) -> Any:
    data = {
        "log": SimpleUploadedFile("session.jsonl", log),
        "blob": [SimpleUploadedFile(name, content) for name, content in blobs],
    }
    return client.post(
        reverse("api_ingest"), data=data, headers={"Authorization": f"Bearer {secret}"}
    )


def test_an_upload_for_a_pruned_session_answers_410_and_writes_nothing(
    record, client, secret, data_dir, tmp_path
):
    session = record(120, folder=tmp_path / "runs")
    prune(older_than=NINETY_DAYS)
    day = PrunedSession.objects.get().pruned_at.strftime("%Y-%m-%d")
    before = files_under(data_dir)
    fresh = str(uuid6.uuid7())
    log = (
        Path(session.source_path).read_bytes()
        + (json.dumps(tool_result_item(2, f"[blob:{fresh}] text, 1 line\nhello")) + "\n").encode()
    )

    response = upload(client, secret, log, (f"{fresh}.txt", b"hello\n"))

    assert response.status_code == 410
    message = response.content.decode()
    assert message.count("\n") == 1
    assert f"session {session.id} was deleted by retention on {day}" in message
    assert str(data_dir) not in message
    assert files_under(data_dir) == before
    assert not Session.objects.exists() and not Item.objects.exists()
    assert not Blob.objects.filter(id=fresh).exists()


def test_an_upload_that_brings_a_pruned_blob_is_refused_and_lists_it(
    record, blob_at, client, secret, data_dir
):
    first, second = blob_at(200), blob_at(210, "second\n" * 90)
    record(120, blobs=(first, second))
    prune(older_than=NINETY_DAYS)
    before = files_under(data_dir)
    log = "".join(
        json.dumps(r) + "\n"
        for r in (
            header(uuid.uuid4()),
            user_item(1, "again"),
            tool_result_item(2, f"[blob:{first}] text, 60 lines\n..."),
        )
    ).encode()
    fine = str(uuid6.uuid7())

    response = upload(
        client,
        secret,
        log,
        (f"{first}.txt", b"back again\n"),
        (f"{second}.txt", b"and again\n"),
        (f"{fine}.txt", b"a new one\n"),
    )

    assert response.status_code == 410
    message = response.content.decode()
    assert "deleted by retention" in message
    assert str(first) in message and str(second) in message and fine not in message
    assert files_under(data_dir) == before
    assert not Session.objects.exists()


# --- dry run and bad input -----------------------------------------------------------------


def test_a_dry_run_deletes_nothing_and_reports_the_same_numbers(
    record, blob_at, data_dir, monkeypatch, user
):
    monkeypatch.setattr(catalog, "RENDER_JSON_FROM_BYTES", 100)
    big = blob_at(200, value=[{"n": n} for n in range(80)])
    share(big, user)
    record(120, blobs=(big, blob_at(300)))
    record(100, blobs=(blob_at(95),))
    record(10, blobs=(blob_at(200, "kept by a recent run\n" * 50),))
    blob_at(150, value={"never": "referenced"})
    files = files_under(data_dir)
    rows = (Session.objects.count(), Item.objects.count(), Blob.objects.count())

    dry, _ = run_prune("--older-than", "90d", "--dry-run")
    dry_report = prune(older_than=NINETY_DAYS, dry_run=True)

    assert files_under(data_dir) == files
    assert (Session.objects.count(), Item.objects.count(), Blob.objects.count()) == rows
    assert not PrunedSession.objects.exists() and not PrunedBlob.objects.exists()
    assert dry.startswith("dry run, nothing deleted: would prune 2 sessions (5 items) and 4 blobs")

    real_report = prune(older_than=NINETY_DAYS)

    def numbers(report: PruneReport) -> tuple[Any, ...]:
        return (
            set(report.session_ids),
            set(report.blob_ids),
            report.items,
            report.blob_bytes,
            report.log_bytes,
            report.derived_bytes,
        )

    assert numbers(dry_report) == numbers(real_report)
    assert real_report.derived_bytes > 0 and real_report.log_bytes > 0
    freed = sum(files.values()) - sum(files_under(data_dir).values())
    assert freed == real_report.total_bytes
    assert f"would free {real_report.total_bytes:,} bytes" in dry


@pytest.mark.parametrize(
    "value", ["90", "d", "-5d", "90days", "1.5d", "0d", "", "5w", "90 d", "9" * 12 + "d", "९०d"]
)
def test_it_refuses_a_bad_older_than_with_one_line(value, record):
    session = record(120)

    with pytest.raises(CommandError) as raised:
        run_prune(f"--older-than={value}")  # with "=", argparse takes "-5d" as the value

    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("--older-than: ")
    assert Session.objects.filter(id=session.id).exists()


def test_it_refuses_an_age_that_reaches_before_year_one():
    with pytest.raises(RetentionError, match="before the year 1"):
        prune(older_than=parse_older_than("999999999d"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        (" 1d ", timedelta(days=1)),
    ],
)
def test_it_reads_days_hours_and_minutes(value, expected):
    assert parse_older_than(value) == expected


def test_hours_are_honoured(record):
    recent = record(0.4)  # about ten hours ago
    older = record(0.6)  # about fourteen hours ago

    run_prune("--older-than", "12h")

    assert Session.objects.filter(id=recent.id).exists()
    assert not Session.objects.filter(id=older.id).exists()


# --- admin ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", [PrunedSession, PrunedBlob])
def test_the_admin_lists_and_shows_tombstones(admin_client, record, blob_at, model):
    record(120, blobs=(blob_at(200),))
    prune(older_than=NINETY_DAYS)
    name = model._meta.model_name
    tombstone = model.objects.get()

    changelist = admin_client.get(reverse(f"admin:blobviewer_{name}_changelist"))
    change = admin_client.get(reverse(f"admin:blobviewer_{name}_change", args=[tombstone.pk]))

    assert changelist.status_code == 200 and str(tombstone.id) in changelist.content.decode()
    assert change.status_code == 200
    assert admin_client.get(reverse(f"admin:blobviewer_{name}_add")).status_code == 403
