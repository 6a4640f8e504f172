"""The site reads blobs through core's blob indexes (docs/store.md#the-blob-index): none of
its own in the database, pages and /api/inspect that read only what they show, `keys:`
everywhere, and a big JSON blob's rendering written an entry at a time with its line
index beside it."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobviewer.catalog import renderings as json_rendering
from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store, renderings
from blobviewer.models import Blob
from core.content import Structured
from core.inspect_tool import inspect_blob
from core.json_values import dumps_indented
from core.store import FsBlobStore
from core.store.index import INDEX_FOLDER, JsonIndex, index_path, open_index
from core.store.index import json_index as json_index_module
from tests.core.strategies import json_values

pytestmark = pytest.mark.django_db

# Over the store's INDEX_MIN_BYTES (1 MB): these get index files.
BIG_ARRAY = [{"id": n, "name": f"entry <{n}>", "tags": ["a", "b"]} for n in range(40_000)]
BIG_OBJECT = {f"key {n}": {"n": n, "label": f"<{n}>"} for n in range(30_000)} | {
    "items": [{"id": n} for n in range(30_000)]
}


def derived_files(blob_id: object) -> list[Path]:
    """The blob's files in `derived/` (file store): its rendering, that rendering's index."""
    root = renderings().root
    rendering = [path for path in (root / f"{blob_id}.txt",) if path.exists()]
    return rendering + sorted((root / ".index").glob(f"{blob_id}*"))


def refuse_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("the whole blob was loaded")

    monkeypatch.setattr(FsBlobStore, "load_sync", refuse)


def body(response: Any) -> str:
    return response.content.decode()


def text_of(response: Any) -> str:
    """What a page shows as text (markup left out, entities read)."""
    return html.unescape(re.sub(r"<[^>]+>", "", body(response)))


def test_blob_rows_hold_no_index_of_their_own() -> None:
    assert "line_index" not in {field.name for field in Blob._meta.get_fields()}


def test_indexing_a_big_json_blob_reads_its_facts_from_its_index(
    json_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = json_blob(BIG_ARRAY)
    assert index_path(blob_store().root, str(blob_id)).exists()  # written when stored
    refuse_loads(monkeypatch)
    row = refresh_blob(blob_id, store=blob_store())
    assert (row.kind, row.count, row.error) == ("json_array", 40_000, "")


def test_an_old_blob_gets_its_index_when_it_is_first_indexed(text_blob: Any) -> None:
    store = blob_store()
    blob_id = text_blob("".join(f"line {n}\n" for n in range(200_000)))
    path = index_path(store.root, str(blob_id))
    path.unlink()  # as if stored before indexes existed
    row = refresh_blob(blob_id, store=store)
    assert (row.kind, row.count) == ("text", 200_000)
    assert path.exists()


def test_a_text_page_deep_inside_reads_through_the_index(
    logged_in_client: Any, text_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = text_blob("".join(f"line {n} <x>\n" for n in range(1, 200_001)))
    refresh_blob(blob_id, store=blob_store())
    refuse_loads(monkeypatch)
    response = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"selector": "lines:199990-200000"}
    )
    assert response.status_code == 200
    assert "line 199995 &lt;x&gt;" in body(response)
    assert "line 199989 " not in body(response)


@pytest.mark.parametrize(
    ("selector", "shown", "not_shown"),
    [
        ("slice:39990..39992", "entry &lt;39991&gt;", "entry &lt;39992&gt;"),
        ("slice:39000.. | slice:..39001", "entry &lt;39000&gt;", "entry &lt;39001&gt;"),
    ],
)
def test_a_json_slice_page_reads_only_its_entries(
    logged_in_client: Any,
    json_blob: Any,
    monkeypatch: pytest.MonkeyPatch,
    selector: str,
    shown: str,
    not_shown: str,
) -> None:
    blob_id = json_blob(BIG_ARRAY)
    refresh_blob(blob_id, store=blob_store())
    refuse_loads(monkeypatch)
    response = logged_in_client.get(reverse("blob_detail", args=[blob_id]), {"selector": selector})
    assert response.status_code == 200
    assert shown in body(response) and not_shown not in body(response)


def test_key_and_keys_pages_of_a_big_object_read_through_the_index(
    logged_in_client: Any, json_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = json_blob(BIG_OBJECT)
    refresh_blob(blob_id, store=blob_store())
    refuse_loads(monkeypatch)
    url = reverse("blob_detail", args=[blob_id])

    keys = logged_in_client.get(url, {"selector": "keys:29998.."})
    assert keys.status_code == 200
    assert "key 29999: object{2}" in text_of(keys) and "items: array[30000]" in text_of(keys)
    assert "key 29997:" not in text_of(keys)

    value = logged_in_client.get(url, {"selector": "key:key 12345"})
    assert value.status_code == 200 and "&lt;12345&gt;" in body(value)

    items = logged_in_client.get(url, {"selector": "key:items | slice:29999.."})
    assert items.status_code == 200 and "29999" in body(items)

    missing = logged_in_client.get(url, {"selector": "key:nope"})
    assert missing.status_code == 400
    assert "key:nope: no such key; the keys are: key 0, key 1," in body(missing)
    assert "(+29991 more)" in body(missing)


def test_keys_in_the_api_is_what_the_tool_returns(
    logged_in_client: Any, json_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = json_blob({"b": [1, 2], "a": "x", "c": None})
    big = json_blob(BIG_OBJECT)
    refuse_loads(monkeypatch)  # the small one is read whole: unpatch for it below
    url = reverse("api_inspect", args=[big])
    response = logged_in_client.get(url, {"selector": "key:items | keys:0..1"})
    assert response.status_code == 400
    assert response.content.decode().startswith("keys: applies to a JSON object; key:items")

    response = logged_in_client.get(url, {"selector": "keys:29990..29995"})
    assert response.status_code == 200
    assert response.content.decode() == inspect_blob(blob_store(), str(big), "keys:29990..29995")
    assert response.content.decode().split("\n")[1] == "key 29990: object{2}"

    monkeypatch.undo()
    response = logged_in_client.get(reverse("api_inspect", args=[small]), {"selector": "keys:1.."})
    assert response.content.decode() == (
        f"[blob:{small}] keys 1..3 of 3 keys\na: string(1)\nc: null"
    )


def test_the_overview_of_a_big_object_goes_on_with_keys(
    logged_in_client: Any, json_blob: Any
) -> None:
    blob_id = json_blob(BIG_OBJECT)
    response = logged_in_client.get(reverse("api_inspect", args=[blob_id]))
    last = response.content.decode().split("\n")[-1]
    assert last.startswith("… truncated — continue with keys:")
    assert last.endswith("..")


def test_a_big_json_rendering_keeps_its_line_index_beside_it(
    logged_in_client: Any, json_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = json_blob(BIG_ARRAY)
    refresh_blob(blob_id, store=blob_store())
    rendering, its_index = derived_files(blob_id)
    assert rendering.read_text() == dumps_indented(BIG_ARRAY)
    assert its_index == renderings().root / INDEX_FOLDER / f"{blob_id}.idx"

    its_index.unlink()  # a cache: made again by the next page that reads the rendering
    refuse_loads(monkeypatch)
    response = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"start": "1001", "as": "raw"}
    )
    assert response.status_code == 200
    assert "entry &lt;" in body(response)
    assert its_index.exists()


def test_the_rendering_is_written_without_loading_the_blob(
    json_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = json_blob(BIG_OBJECT)
    refuse_loads(monkeypatch)
    monkeypatch.setattr(json_rendering, "_RUN", 10_000)  # many runs, and `items` alone
    refresh_blob(blob_id, store=blob_store())
    assert (renderings().root / f"{blob_id}.txt").read_text() == dumps_indented(BIG_OBJECT)


def test_a_text_blob_with_its_index_file_gone_still_shows(
    logged_in_client: Any, text_blob: Any
) -> None:
    blob_id = text_blob("".join(f"row {n}\n" for n in range(150_000)))
    refresh_blob(blob_id, store=blob_store())
    index_path(blob_store().root, str(blob_id)).unlink()
    (blob_store().root / INDEX_FOLDER).rmdir()
    (blob_store().root / INDEX_FOLDER).write_bytes(b"")  # and no index can be written
    response = logged_in_client.get(
        reverse("blob_detail", args=[blob_id]), {"selector": "lines:149999-"}
    )
    assert response.status_code == 200 and "row 149999" in body(response)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.lists(json_values, max_size=10),
        st.dictionaries(
            st.text(max_size=5), st.one_of(json_values, st.lists(json_values)), max_size=8
        ),
    ),
    st.sampled_from([1, 40, 10_000]),
)
def test_the_rendering_written_an_entry_at_a_time_is_dumps_indented(
    data_dir: Any, value: Any, run: int
) -> None:
    """Runs of one entry, of a few, of all; a table for every top-level container (so
    `key:` values are indented one level down); integers beyond 64 bits and lone
    surrogates, which send dumps_indented to the standard library."""
    store = FsBlobStore(data_dir / "blobs", index_min_bytes=0)
    saved = json_index_module.CHILD_MIN, json_rendering._RUN
    json_index_module.CHILD_MIN, json_rendering._RUN = 0, run
    try:
        blob_id = store.store_sync(Structured(value))
        index = open_index(store, blob_id, min_bytes=0)
        assert isinstance(index, JsonIndex)
        with index:
            assert json_rendering.write_rendering(blob_id, index)
    finally:
        json_index_module.CHILD_MIN, json_rendering._RUN = saved
    rendering = (renderings().root / f"{blob_id}.txt").read_bytes()
    expected = dumps_indented(store.load_sync(blob_id).value)
    assert rendering.decode("utf-8", "surrogatepass") == expected


def test_a_read_only_store_is_read_without_an_index(logged_in_client: Any, json_blob: Any) -> None:
    blob_id = json_blob(BIG_ARRAY)
    store = blob_store()
    index_path(store.root, str(blob_id)).unlink()
    (store.root / INDEX_FOLDER).rmdir()
    (store.root / INDEX_FOLDER).write_bytes(b"")
    refresh_blob(blob_id, store=store)
    response = logged_in_client.get(
        reverse("api_inspect", args=[blob_id]), {"selector": "slice:39999.."}
    )
    assert response.status_code == 200
    assert response.content.decode().split("\n")[1] == (
        '{"id":39999,"name":"entry <39999>","tags":["a","b"]}'
    )


def test_a_blob_stored_as_text_never_needs_loading_for_its_facts(
    text_blob: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob_id = text_blob("a\nb\n")  # small: its index is made in memory
    refuse_loads(monkeypatch)
    assert refresh_blob(blob_id, store=blob_store()).count == 2
