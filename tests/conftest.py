"""Settings for the whole suite. Nothing here may import Django: tests/core runs without it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings
from s3_server import SeaweedFailed, SeaweedServer

from core.store import BlobStore, open_store

# Property tests judge behaviour, not speed (bench/ measures that): on a busy two-core CI
# machine a slow example must not fail a run.
hypothesis_settings.register_profile("blobviewer", deadline=None, print_blob=True)
hypothesis_settings.load_profile("blobviewer")

# Every test gets its own data folder and TMPDIR, and the run fails when ./data changed.
pytest_plugins = ["isolation", "pytester"]


@pytest.fixture
def data_dir(own_folders: Path, settings: Any) -> Path:
    """This test's data directory (tests/isolation.py), with its blobs/ and sessions/
    folders: the one the site reads from (web and browser tests)."""
    (own_folders / "blobs").mkdir(exist_ok=True)
    (own_folders / "sessions").mkdir(exist_ok=True)
    settings.BLOBVIEWER_DATA = own_folders
    return own_folders


# -- Object storage: one SeaweedFS for the whole run ---------------------------------------------
# tests/s3_server.py starts `weed server -s3` in a temporary folder on free loopback ports.
# A server that cannot start FAILS every test that needs it, with its log: never a skip.


@dataclass(frozen=True)
class S3Place:
    """A fresh place in the test bucket: `s3://<bucket>/<prefix>`, and the environment
    (AWS_ENDPOINT_URL, keys, region) that S3BlobStore.from_url reads."""

    server: SeaweedServer
    bucket: str
    prefix: str
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def client(self) -> Any:
        return self.server.client()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """SeaweedFS's S3 gateway, started once per test session and stopped at its end."""
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    try:
        server.start()
    except SeaweedFailed as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_bucket(s3_server: SeaweedServer) -> str:
    """One bucket for the run (each bucket costs the server a set of volumes); tests get
    their own prefix in it from :func:`s3_place`."""
    return s3_server.make_bucket("bv-tests")


@pytest.fixture
def s3_place(s3_server: SeaweedServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> S3Place:
    """An empty `s3://<bucket>/<prefix>` for one test, with the AWS_* variables set (also
    for the subprocesses it starts)."""
    env = s3_server.env()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return S3Place(s3_server, s3_bucket, f"t-{uuid.uuid4().hex[:16]}", env)


@pytest.fixture(params=["fs", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    """An empty store of each kind: the test runs once on a folder (FsBlobStore) and once
    on SeaweedFS (S3BlobStore), through core.store.open_store as the site and CLI do."""
    if request.param == "fs":
        return open_store(str(tmp_path / "blobs"))
    place: S3Place = request.getfixturevalue("s3_place")
    return open_store(place.url)
