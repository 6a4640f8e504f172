"""Blob ids (docs/store.md): UUID v7 whose timestamp is the creation time; only UUIDs are ids."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from core.store.blob_id import blob_created_at, find_blob_refs, new_blob_id, parse_blob_id
from core.store.errors import BlobStoreError, InvalidBlobId

CANONICAL = "0190f5e2-7c1a-7b3e-9c4d-123456789abc"


def test_new_ids_are_uuid_v7() -> None:
    blob_id = new_blob_id()
    assert isinstance(blob_id, uuid.UUID)
    assert blob_id.version == 7
    assert blob_id.variant == uuid.RFC_4122


def test_an_id_tells_when_it_was_made() -> None:
    before = datetime.now(UTC)
    created = blob_created_at(new_blob_id())
    after = datetime.now(UTC)
    assert created is not None
    assert created.tzinfo is not None
    # The timestamp has millisecond precision, and uuid6.uuid7() moves it 1 ms ahead for
    # each id made within one millisecond (to keep ids ordered), so after the bursts of
    # other tests in this process it may run a little ahead of the clock.
    assert before - timedelta(milliseconds=1) <= created <= after + timedelta(seconds=30)


def test_the_creation_time_comes_from_the_first_48_bits() -> None:
    created = blob_created_at(uuid.UUID(CANONICAL))
    assert created == datetime.fromtimestamp(0x0190F5E27C1A / 1000, tz=UTC)


def test_a_uuid_of_another_version_has_no_creation_time() -> None:
    assert blob_created_at(uuid.uuid4()) is None


def test_new_ids_sort_in_creation_order() -> None:
    ids = []
    for _ in range(5):
        ids += [new_blob_id() for _ in range(50)]
        time.sleep(0.002)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_it_parses_the_canonical_form() -> None:
    assert parse_blob_id(CANONICAL) == uuid.UUID(CANONICAL)
    assert str(parse_blob_id(CANONICAL)) == CANONICAL


def test_it_accepts_uppercase_and_renders_lowercase() -> None:
    assert str(parse_blob_id(CANONICAL.upper())) == CANONICAL


def test_it_passes_a_uuid_through() -> None:
    blob_id = uuid.UUID(CANONICAL)
    assert parse_blob_id(blob_id) is blob_id


@pytest.mark.parametrize(
    "value",
    [
        "../etc/passwd",
        "",
        "not-a-uuid",
        None,
        42,
        b"0190f5e2-7c1a-7b3e-9c4d-123456789abc",
        CANONICAL + "/../../etc/passwd",
        "../" + CANONICAL,
        CANONICAL[:-1],
        CANONICAL + "0",
        CANONICAL.replace("-", "/"),
        "0190f5e2-7c1a-7b3e-9c4d-123456789abg",
        "\x00" + CANONICAL,
    ],
)
def test_anything_but_a_uuid_is_an_invalid_blob_id(value: object) -> None:
    with pytest.raises(InvalidBlobId) as raised:
        parse_blob_id(value)  # type: ignore[arg-type]
    assert isinstance(raised.value, BlobStoreError)
    assert isinstance(raised.value, ValueError)
    assert "\n" not in str(raised.value)


def test_the_error_names_what_it_expected() -> None:
    with pytest.raises(InvalidBlobId, match="expected a UUID"):
        parse_blob_id("not-a-uuid")


def test_a_huge_bad_id_gives_a_short_message() -> None:
    with pytest.raises(InvalidBlobId) as raised:
        parse_blob_id("x" * 10_000)
    assert len(str(raised.value)) < 200


def test_it_finds_blob_references_in_order_without_repeats() -> None:
    first, second = uuid.UUID(CANONICAL), new_blob_id()
    text = f"see [blob:{second}] and [blob:{CANONICAL.upper()}], then [blob:{second}] again"
    assert find_blob_refs(text) == [second, first]


def test_it_ignores_references_that_are_not_uuids() -> None:
    assert find_blob_refs("[blob:../etc/passwd] [blob:1234] [blob: " + CANONICAL + "]") == []


def test_a_crafted_v7_id_past_year_9999_has_no_creation_time() -> None:
    assert blob_created_at(uuid.UUID("ffffffff-ffff-7fff-bfff-ffffffffffff")) is None
