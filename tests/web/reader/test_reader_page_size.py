"""The reader's page stays under 200 KB of HTML for a 100 MB blob, with everything on:
line numbers and colouring for a text, the tree, the key completions and the help for
JSON. The blobs are written to the store a chunk at a time, as an agent would stream them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from blobviewer.catalog.blobs import refresh_blob
from blobviewer.data_dir import blob_store
from blobviewer.reader.selector_help import COMPLETIONS
from core.store import FsBlobStore
from core.store.blob_id import BlobId, new_blob_id

pytestmark = pytest.mark.django_db

LIMIT = 200_000
SIZE = 100 * 1024 * 1024


def stream(path: Path, pieces) -> None:
    with open(path, "w", encoding="utf-8") as file:
        batch: list[str] = []
        for piece in pieces:
            batch.append(piece)
            if len(batch) >= 5_000:
                file.write("".join(batch))
                batch.clear()
        file.write("".join(batch))


def big_diff() -> BlobId:
    """A 100 MB unified diff: coloured by its content, with lines that escape to more."""
    blob_id = new_blob_id()
    path = blob_store().root / f"{blob_id}.txt"

    def lines():
        yield "diff --git a/big.html b/big.html\n--- a/big.html\n+++ b/big.html\n"
        written, n = 0, 0
        while written < SIZE:
            n += 1
            if n % 40 == 1:
                line = f'@@ -{n},40 +{n},40 @@ <section id="s{n}">\n'
            else:
                sign = "+-    "[n % 6]
                line = f'{sign}  <p class="x">item {n} &amp; <b>"more"</b> text</p>\n'
            written += len(line)
            yield line

    stream(path, lines())
    assert path.stat().st_size >= SIZE
    refresh_blob(blob_id, store=blob_store())
    return blob_id


def big_json_object() -> BlobId:
    """A 100 MB JSON object of 50,000 keys, each an object holding a long string."""
    blob_id = new_blob_id()
    path = blob_store().root / f"{blob_id}.json"
    text = "lorem <ipsum> & dolor " * 95

    def pieces():
        yield "{"
        for n in range(50_000):
            yield ("," if n else "") + f'"key_{n:05}":{{"n":{n},"text":"{text}","tags":["a","b"]}}'
        yield "}"

    stream(path, pieces())
    assert path.stat().st_size >= SIZE
    refresh_blob(blob_id, store=blob_store())
    return blob_id


def test_the_page_of_a_100mb_diff_stays_small_coloured(logged_in_client, data_dir):
    blob_id = big_diff()
    url = reverse("blob_detail", args=[blob_id])

    for query in ({}, {"selector": "lines:1000000-"}):
        for headers in ({}, {"HX-Request": "true"}):
            response = logged_in_client.get(url, query, headers=headers)
            html = response.content.decode()
            assert response.status_code == 200
            assert len(response.content) < LIMIT, (query, headers, len(response.content))
            assert "coloured as Diff" in html and 'class="pg-gi"' in html
            assert html.count('<span class="r" id="L') > 100


def test_the_page_of_a_100mb_json_object_stays_small_with_its_tree(
    logged_in_client, data_dir, monkeypatch
):
    blob_id = big_json_object()

    def no_whole_loads(*args, **kwargs):
        raise AssertionError("the whole blob was loaded for its first page")

    monkeypatch.setattr(FsBlobStore, "load_sync", no_whole_loads)
    url = reverse("blob_detail", args=[blob_id])

    for headers in ({}, {"HX-Request": "true"}):
        response = logged_in_client.get(url, headers=headers)
        html = response.content.decode()
        assert response.status_code == 200
        assert len(response.content) < LIMIT, (headers, len(response.content))
        assert '<div class="json-tree"' in html
        assert re.search(r"keys 0\.\.\d+ of 50,000", html)
        datalist = re.search(r'<datalist id="blob-view-keys">(.*?)</datalist>', html, re.S)
        assert datalist and datalist.group(1).count("<option value=") == COMPLETIONS
        assert "lorem &lt;ipsum&gt; &amp; dolor" in html
