"""The diff of two outputs, a bounded page at a time (blobviewer.compare.output_diff):
texts and JSON, in memory or stored, windows and pages, long lines."""

from __future__ import annotations

import difflib
import json
import random
import uuid
from pathlib import Path

import pytest

from blobviewer.compare import output_diff as module
from blobviewer.compare.line_sources import (
    LINE_BYTES,
    RENDERED_FROM_BYTES,
    StoredOutput,
    TextOutput,
)
from blobviewer.compare.output_diff import SHOWN_CHARS, DiffPage, HunkLine, output_diff
from core.content import Structured, Text
from core.json_values import dumps_for_storage, dumps_indented
from core.store import BlobCorrupt, FsBlobStore


@pytest.fixture
def store(tmp_path: Path) -> FsBlobStore:
    return FsBlobStore(tmp_path / "blobs")


def _all_pages(a: object, b: object, *, window: int = 2000) -> list[DiffPage]:
    pages = [output_diff(a, b, window=window)]  # type: ignore[arg-type]
    while pages[-1].more is not None:
        assert len(pages) < 10_000
        pages.append(output_diff(a, b, page=pages[-1].more, window=window))  # type: ignore[arg-type]
    return pages


def _patched(a: list[str], pages: list[DiffPage]) -> list[str]:
    """B rebuilt from A and the hunks of every page (context shown twice, at a page's
    edge, is taken once): a diff that pages well rebuilds B exactly."""
    out: list[str] = []
    at = 1  # the next line of A to take
    lines: list[HunkLine] = [line for page in pages for hunk in page.hunks for line in hunk.lines]
    for line in lines:
        if line.kind == "context" and line.b_number is not None and line.b_number <= len(out):
            continue
        if line.a_number is not None:
            out.extend(a[at - 1 : line.a_number - 1])
            at = line.a_number
        else:
            assert line.b_number is not None
            while len(out) < line.b_number - 1:
                out.append(a[at - 1])
                at += 1
        if line.kind == "context":
            assert a[at - 1] == line.text
            out.append(a[at - 1])
            at += 1
        elif line.kind == "removed":
            assert a[at - 1] == line.text
            at += 1
        else:
            out.append(line.text)
    out.extend(a[at - 1 :])
    return out


# -- texts ---------------------------------------------------------------------------------


def test_identical_outputs_say_so_with_an_empty_diff() -> None:
    page = output_diff(TextOutput("a\nb\n"), TextOutput("a\nb\n"))
    assert page.identical and page.hunks == [] and page.more is None
    assert page.a_lines == page.b_lines == 2


def test_a_text_diff_is_the_unified_diff_of_its_lines() -> None:
    a = [f"line {n}" for n in range(1, 41)]
    b = a[:5] + ["inserted"] + a[5:19] + ["changed"] + a[20:36] + a[38:]
    page = output_diff(TextOutput("\n".join(a)), TextOutput("\n".join(b)))
    expected = list(difflib.unified_diff(a, b, n=3, lineterm=""))[2:]
    assert page.unified() == "\n".join(expected)
    assert not page.identical and page.more is None and page.views == ("text", "text")


def test_each_line_carries_its_kind_and_numbers_on_each_side() -> None:
    page = output_diff(TextOutput("a\nb\nc\nd\n"), TextOutput("a\nB\nc\nd\ne\n"))
    [hunk] = page.hunks
    assert hunk.header == "@@ -1,4 +1,5 @@"
    assert [(line.kind, line.a_number, line.b_number, line.text) for line in hunk.lines] == [
        ("context", 1, 1, "a"),
        ("removed", 2, None, "b"),
        ("added", None, 2, "B"),
        ("context", 3, 3, "c"),
        ("context", 4, 4, "d"),
        ("added", None, 5, "e"),
    ]


def test_line_ends_follow_the_line_model() -> None:
    assert output_diff(TextOutput("a\r\nb\r\n"), TextOutput("a\nb")).identical


def test_an_empty_side_is_all_added_or_all_removed() -> None:
    page = output_diff(TextOutput(""), TextOutput("x\ny\n"))
    assert page.unified() == "@@ -0,0 +1,2 @@\n+x\n+y"


# -- JSON ----------------------------------------------------------------------------------


def test_json_outputs_are_diffed_in_their_indented_form_keys_in_their_order() -> None:
    a = '{"zeta": 1, "alpha": {"x": [1, 2]}, "name": "run"}'
    b = '{"zeta": 1, "alpha": {"x": [1, 3]}, "name": "run"}'
    page = output_diff(TextOutput(a), TextOutput(b))
    assert page.views == ("json", "json")
    expected = difflib.unified_diff(
        json.dumps(json.loads(a), indent=2).split("\n"),
        json.dumps(json.loads(b), indent=2).split("\n"),
        n=3,
        lineterm="",
    )
    assert page.unified() == "\n".join(list(expected)[2:])
    assert "-      2" in page.unified() and "+      3" in page.unified()


def test_compact_and_spaced_json_of_the_same_value_are_identical() -> None:
    assert output_diff(TextOutput('{"a":[1,2]}'), TextOutput('{ "a" : [ 1, 2 ] }\n')).identical


def test_json_beside_a_plain_text_is_diffed_as_text() -> None:
    page = output_diff(TextOutput('{"a": 1}'), TextOutput("not json"))
    assert page.views == ("text", "text")
    assert page.unified() == '@@ -1 +1 @@\n-{"a": 1}\n+not json'


def test_a_stored_json_blob_is_diffed_indented(store: FsBlobStore) -> None:
    blob_a = store.store_sync(Structured([{"id": 1, "ok": True}, {"id": 2, "ok": True}]))
    blob_b = store.store_sync(Structured([{"id": 1, "ok": True}, {"id": 2, "ok": False}]))
    page = output_diff(StoredOutput(store, blob_a), StoredOutput(store, blob_b))
    assert page.views == ("json", "json")
    assert '-    "ok": true' in page.unified() and '+    "ok": false' in page.unified()
    assert page.a_lines == len(dumps_indented([{"id": 1, "ok": True}] * 2).split("\n"))


def test_a_big_json_blob_is_read_from_its_rendering_and_raw_without_one(
    store: FsBlobStore, tmp_path: Path
) -> None:
    value = [{"n": n, "label": f"entry {n}"} for n in range(50_000)]  # over 1 MB stored
    changed = [*value[:-1], {"n": 49_999, "label": "last"}]
    ids = []
    renderings = FsBlobStore(tmp_path / "derived")
    for each in (value, changed):
        blob_id = uuid.uuid4()
        store.put_stream_sync(blob_id, "json", [dumps_for_storage(each)])
        renderings.put_sync(blob_id, Text(dumps_indented(each)))  # as the catalog writes it
        ids.append(blob_id)
    assert store.size_sync(ids[0]) >= RENDERED_FROM_BYTES  # not loaded: read through its lines
    page = output_diff(
        StoredOutput(store, ids[0], renderings), StoredOutput(store, ids[1], renderings)
    )
    assert page.views == ("json", "json")
    [hunk] = page.hunks
    assert [line.text for line in hunk.lines if line.kind != "context"] == [
        '    "label": "entry 49999"',
        '    "label": "last"',
    ]
    removed = next(line for line in hunk.lines if line.kind == "removed")
    assert removed.a_number == page.a_lines - 2 == len(dumps_indented(value).split("\n")) - 2
    raw = output_diff(StoredOutput(store, ids[0]), StoredOutput(store, ids[1]))
    assert raw.views == ("json_raw", "json_raw")
    [line_a, line_b] = raw.hunks[0].lines
    assert line_a.cut and len(line_a.text) == SHOWN_CHARS and line_a.kind == "removed"


# -- stored texts and long lines -----------------------------------------------------------


def test_a_stored_text_is_diffed_against_one_in_memory(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Text("one\ntwo\nthree\n"))
    page = output_diff(StoredOutput(store, blob_id), TextOutput("one\n2\nthree\n"))
    assert page.unified() == "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three"
    assert output_diff(StoredOutput(store, blob_id), TextOutput("one\ntwo\nthree")).identical


def test_long_lines_are_shown_cut_and_compared_whole(store: FsBlobStore) -> None:
    start = "x" * (LINE_BYTES + 5_000)
    a = f"head\n{start}A tail\nend\n"
    b = f"head\n{start}B tail\nend\n"
    ids = [store.store_sync(Text(a)), store.store_sync(Text(b))]
    for page in (
        output_diff(StoredOutput(store, ids[0]), StoredOutput(store, ids[1])),
        output_diff(TextOutput(a), StoredOutput(store, ids[1])),
        output_diff(TextOutput(a), TextOutput(b)),
    ):
        removed, added = (line for line in page.hunks[0].lines if line.kind != "context")
        assert removed.cut and len(removed.text) == SHOWN_CHARS
        assert removed.size == len(start) + 6 and added.kind == "added"
    assert output_diff(TextOutput(a), StoredOutput(store, ids[0])).identical


def test_a_stored_text_that_is_not_utf8_is_a_corrupt_blob(store: FsBlobStore) -> None:
    blob_id = uuid.uuid4()
    store.put_stream_sync(blob_id, "text", [b"fine\n\xff\xfe broken\n"])
    with pytest.raises(BlobCorrupt, match="not UTF-8"):
        output_diff(StoredOutput(store, blob_id), TextOutput("fine\nother\n"))


# -- windows and pages ---------------------------------------------------------------------


def test_a_page_diffs_a_window_and_says_there_is_more() -> None:
    a = [f"line {n}" for n in range(1, 1001)]
    b = list(a)
    for n in range(50, 1000, 100):
        b[n] = f"changed {n}"
    pages = _all_pages(TextOutput("\n".join(a)), TextOutput("\n".join(b)), window=120)
    assert len(pages) > 3
    assert pages[0].hunks[0].lines[3].a_number == 51  # the first difference, after context
    for page in pages:
        for hunk in page.hunks:
            numbers = [line.a_number for line in hunk.lines if line.a_number is not None]
            assert max(numbers) - min(numbers) < 120
    assert all(page.more == page.page + 1 for page in pages[:-1])
    assert _patched(a, pages) == b


def test_a_change_the_window_cuts_goes_to_the_next_page_whole() -> None:
    a = [f"line {n}" for n in range(1, 101)]
    b = a[:10] + [f"new {n}" for n in range(15)] + a[10:]
    first, *rest = _all_pages(TextOutput("\n".join(a)), TextOutput("\n".join(b)), window=20)
    assert rest  # the 15 new lines do not fit a window of 20 lines after the context
    assert _patched(a, [first, *rest]) == b


def test_a_page_past_the_last_difference_is_empty() -> None:
    a = "\n".join(f"line {n}" for n in range(100))
    b = a.replace("line 5\n", "line five\n")
    page = output_diff(TextOutput(a), TextOutput(b), page=1, window=20)
    assert page.hunks == [] and not page.identical and page.more is None
    assert output_diff(TextOutput(a), TextOutput(b), page=7).hunks == []


def test_a_page_with_many_changed_lines_is_cut_short_and_goes_on() -> None:
    a = [f"line {n}" for n in range(3_000)]
    b = [f"other {n}" for n in range(3_000)]
    pages = _all_pages(TextOutput("\n".join(a)), TextOutput("\n".join(b)))
    assert pages[0].cut_short
    assert sum(len(hunk.lines) for hunk in pages[0].hunks) <= module.SHOWN_LINES
    assert _patched(a, pages) == b


def test_a_page_of_long_lines_stays_small() -> None:
    a = "\n".join(f"{n} " + "<" * 5_000 for n in range(500))
    b = "\n".join(f"{n} " + ">" * 5_000 for n in range(500))
    page = output_diff(TextOutput(a), TextOutput(b))
    shown = sum(len(line.text) * 4 for hunk in page.hunks for line in hunk.lines)  # "&lt;"
    assert shown <= module.SHOWN_BYTES + 4 * SHOWN_CHARS
    assert page.cut_short and page.more == 1


def test_bad_windows_and_pages_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        output_diff(TextOutput("a"), TextOutput("b"), window=3)
    with pytest.raises(ValueError, match="page"):
        output_diff(TextOutput("a"), TextOutput("b"), page=-1)


@pytest.mark.parametrize("seed", range(40))
def test_every_page_together_rebuild_b_from_a(seed: int) -> None:
    rng = random.Random(seed)
    a = [rng.choice("abcdefg") for _ in range(rng.randint(0, 300))]
    b = list(a)
    for _ in range(rng.randint(0, 30)):
        at = rng.randint(0, len(b))
        b[at : at + rng.randint(0, 3)] = [rng.choice("abcxyz") for _ in range(rng.randint(0, 4))]
    pages = _all_pages(
        TextOutput("\n".join(a)), TextOutput("\n".join(b)), window=rng.choice([7, 12, 40])
    )
    assert _patched(a, pages) == b
    assert pages[0].identical == (a == b)
