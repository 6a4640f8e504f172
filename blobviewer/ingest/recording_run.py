"""One recording file ingested as `manage.py ingest` ingests it, with the options of a run
of it: read (resumed where a grown file's last read ended), recognised, imported,
promoted, written, and kept in the object store when there is one. The command runs it
for every file it finds; `POST /api/recordings` for each recording pushed to the site."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from blobviewer.catalog.session_logs import KeptRecordings
from blobviewer.ingest import recording_files
from blobviewer.ingest.errors import IngestError, NotResumable
from blobviewer.ingest.finding import Links
from blobviewer.ingest.importers.json_lines import DEFAULT_MAX_RECORD, SkippedRecord
from blobviewer.ingest.kept_recordings import kept_outcomes
from blobviewer.ingest.marks import ingest_shape
from blobviewer.ingest.options import IngestOptions
from blobviewer.ingest.recording_files import Opened, ReadState
from blobviewer.ingest.sessions import ingest_recordings
from blobviewer.ingest.unchanged import Seen
from blobviewer.search.indexing import blob_bytes_limit
from core.redaction import redaction_enabled
from core.store import BlobStore


@dataclass(frozen=True)
class IngestRun:
    """What every recording of a run is ingested with."""

    store: BlobStore
    options: IngestOptions
    links: Links = field(default_factory=lambda: Links([]))
    max_record: int = DEFAULT_MAX_RECORD
    # With an object store: where each recording's copy is kept (blobviewer.ingest.kept_recordings)
    copies: KeptRecordings | None = None
    # Kept copies fetched for a rebuild: each is ingested as the recording it stands for
    # (Session.source_path as recorded: a path, or an upload's s3:// URL, which Path would
    # turn into s3:/...; ingest only ever writes str() of it).
    sources: dict[Path, str] = field(default_factory=dict)

    def recording(self, path: Path) -> Path:
        """The recording *path* stands for: itself, or the source of a kept copy."""
        return self.sources.get(path, path)  # type: ignore[return-value]  # a str: see above

    @property
    def seen(self) -> Seen:
        """The marks of the files ingested with these options (blobviewer.ingest.unchanged).
        A rebuild or --force reads every file; with an object store a file is read whole,
        since a copy of it is kept (kept_recordings)."""
        owner = self.options.owner.pk if self.options.owner is not None else None
        keeps = self.copies is not None
        shape = ingest_shape(
            self.options.policy,
            self.max_record,
            blob_bytes_limit(),
            owner,
            keeps,
            redaction_enabled(),  # what it redacts is stored
        )
        return Seen(shape, fresh=self.options.rebuild or self.options.force, whole=keeps)

    def outcomes(
        self, path: Path, skipped: list[SkippedRecord], state: ReadState | None
    ) -> list[tuple[str, Any]]:
        """Ingest one recording: ingest_recordings' outcomes, a run's error or the file's as
        an exception, never raised; the records over the cap go to *skipped*. A read that
        resumed and does not fit the session as recorded is done again, whole."""
        read_from = path
        path = self.recording(path)
        opened: Opened | None = None
        ingest = partial(ingest_recordings, path, store=self.store, options=self.options)
        try:
            try:
                opened = _open(read_from, path, self.max_record, skipped, state)  # ingested: kept
                outcomes: list[tuple[str, Any]] = ingest(opened=opened)
            except NotResumable:
                assert state is not None  # only a read with a state resumes
                state.whole()
                skipped.clear()
                opened = _open(read_from, path, self.max_record, skipped, state)
                outcomes = ingest(opened=opened)
        except Exception as error:  # noqa: BLE001 - reported like a run's error
            outcomes = [("", error)]
        if self.copies is not None and opened is not None and read_from == path:
            outcomes = kept_outcomes(self.copies, path, opened, outcomes)
        return outcomes


def _open(
    read_from: Path,
    path: Path | str,
    max_record: int,
    skipped: list[SkippedRecord],
    state: ReadState | None = None,
) -> Opened:
    """open_recording of *read_from*; errors name *path*, the recording it stands for."""
    try:
        return recording_files.open_recording(
            read_from, max_record=max_record, skipped=skipped, state=state
        )
    except IngestError as error:
        if read_from == path:
            raise
        raise type(error)(str(path), error.line, error.message, detail=error.detail) from None
