"""Fixtures for the site's tests: a temporary data directory, users, recorded sessions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from blobviewer.data_dir import blob_store
from blobviewer.ingest.importers.json_lines import DEFAULT_MAX_RECORD, RecordingText
from blobviewer.ingest.sessions import ingest_file
from blobviewer.models import ApiToken
from core.content import Structured, Text
from core.store import BlobStore, FsBlobStore
from core.store.blob_id import BlobId
from core.store.s3 import S3BlobStore
from web.records import SampleSession, record_sample_session


@pytest.fixture
def blob_backend() -> str:
    """Which store holds the site's blobs: "fs" (the data directory's blobs/). A module
    whose tests run on both stores overrides it with ``params=["fs", "s3"]``."""
    return "fs"


@pytest.fixture
def store(data_dir: Path, blob_backend: str, request: pytest.FixtureRequest) -> BlobStore:
    """The site's blob store: the data directory's, or with ``blob_backend == "s3"`` a
    fresh prefix on the test SeaweedFS (settings.BLOBVIEWER_BLOBS, as a team sets it)."""
    if blob_backend == "s3":
        request.getfixturevalue("s3_site")
    return blob_store()


@pytest.fixture
def write_raw_blob(store: BlobStore) -> Callable[[str, bytes], None]:
    """Put bytes under a blob's name (`<id>.txt`) in the site's store the way a writer that
    goes around the store would: a damaged blob, or an agent writing straight into it."""

    def write(name: str, data: bytes) -> None:
        if isinstance(store, S3BlobStore):
            store.objects_root.put(name, data)
        else:
            (Path(store.root) / name).write_bytes(data)  # type: ignore[attr-defined]

    return write


@pytest.fixture
def s3_site(data_dir: Path, s3_place: Any, settings: Any) -> Any:
    """The site on object storage: BLOBVIEWER_BLOBS is a fresh `s3://<bucket>/<prefix>`
    (blobs, renderings, uploaded session logs); the data directory stays for the rest."""
    settings.BLOBVIEWER_BLOBS = s3_place.url
    return s3_place


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="correct-horse-battery")


@pytest.fixture
def logged_in_client(client: Client, user: Any) -> Client:
    client.force_login(user)
    return client


@pytest.fixture
def api_token(user: Any) -> tuple[ApiToken, str]:
    """An active API token of alice's, and its secret."""
    return ApiToken.objects.issue(user=user, name="laptop agent")


@pytest.fixture
def sample_log(store: FsBlobStore, data_dir: Path) -> SampleSession:
    """A sample session log on disk, not ingested yet."""
    return record_sample_session(store, data_dir / "sessions")


@pytest.fixture
def sample_session(sample_log: SampleSession, store: FsBlobStore, db: None) -> SampleSession:
    """The sample session, ingested."""
    ingest_file(sample_log.path, store=store)
    return sample_log


@pytest.fixture
def write_log(data_dir: Path) -> Callable[..., Path]:
    """Write a session log from raw records (header first), for damaged or hostile logs."""

    def write(records: list[dict[str, Any] | str], *, name: str | None = None) -> Path:
        lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
        path = data_dir / "sessions" / (name or f"{uuid.uuid4()}.jsonl")
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        return path

    return write


@pytest.fixture
def text_blob(store: FsBlobStore) -> Callable[[str], BlobId]:
    return lambda text: store.store_sync(Text(text))


@pytest.fixture
def json_blob(store: FsBlobStore) -> Callable[[Any], BlobId]:
    return lambda value: store.store_sync(Structured(value))


class _Counted:
    """A file whose reads are counted."""

    def __init__(self, file, counts: list[int]) -> None:
        self._file, self._counts = file, counts

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._counts.append(len(data))
        return data

    def __getattr__(self, name: str):
        return getattr(self._file, name)


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the reads ingest makes of the recordings it parses."""
    counts: list[int] = []

    @contextmanager
    def counting_open(cls, path, *, max_record=DEFAULT_MAX_RECORD, resume=None):
        with path.open("rb") as file:
            yield cls(path, _Counted(file, counts), max_record=max_record, resume=resume)

    monkeypatch.setattr(RecordingText, "open", classmethod(counting_open))
    return counts
