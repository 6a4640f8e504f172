"""selected_view: the view a selector selects in a stored blob, read through its blob index
(kept by the store, or built in memory), is the view core.selectors.evaluate gives for the
loaded blob, errors included; a range of a text's lines is left to the text index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.content import Content, Structured, Text
from core.grep import Page
from core.selectors import SelectorError, evaluate, parse_selector
from core.store import BlobCorrupt, FsBlobStore
from core.store.index.selection import NotIndexed, selected_view
from tests.core.strategies import json_values

PAGE = Page(max_bytes=300, max_matches=7, line_bytes=50)


def outcome(call: Any) -> Any:
    try:
        return call()
    except SelectorError as error:
        return f"error: {error}"


def check(tmp_path: Path, content: Content, selectors: list[str]) -> None:
    for min_bytes in (0, 1 << 20):  # an index kept beside the blob, or one built in memory
        store = FsBlobStore(tmp_path / f"blobs-{min_bytes}", index_min_bytes=min_bytes)
        blob_id = store.store_sync(content)
        for text in selectors:
            selector = parse_selector(text)
            expected = outcome(lambda: evaluate(selector, content, grep_page=PAGE))  # noqa: B023
            got = outcome(lambda: selected_view(store, blob_id, selector, grep_page=PAGE))  # noqa: B023
            assert got == expected, (min_bytes, text)


json_steps = st.sampled_from(
    ["slice:1..3", "slice:..2", "keys:0..2", "keys:1..", "key:a", "key:b", "lines:1-2"]
    + ["grep:a", "key:a | grep:.", "key:a | slice:0..1", "key:b | keys:0..1", "key:a | lines:2"]
)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.dictionaries(st.sampled_from(["a", "b", "c"]), json_values, max_size=3),
        st.lists(json_values, max_size=5),
        json_values,
    ),
    st.lists(st.lists(json_steps, min_size=1, max_size=2).map(" | ".join), max_size=5),
)
def test_json_views_are_evaluate_s(
    tmp_path_factory: pytest.TempPathFactory, value: Any, selectors: list[str]
) -> None:
    check(tmp_path_factory.mktemp("j"), Structured(value), selectors)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.sampled_from(["a", "ab", "b", "", "é a", "\r"]), max_size=30).map("\n".join),
    st.lists(
        st.sampled_from(["grep:a", "grep:^b$", "lines:2- | grep:a", "lines:3-5 | grep:.", "key:a"]),
        max_size=4,
    ),
)
def test_text_views_are_evaluate_s(
    tmp_path_factory: pytest.TempPathFactory, text: str, selectors: list[str]
) -> None:
    check(tmp_path_factory.mktemp("t"), Text(text), selectors)


@pytest.mark.parametrize(
    "value",
    [[{"": None}], [3, {"a": 1}], [{"a": 1}, 3], [{"k" * 2000: 1}]],
    ids=["empty key", "object second", "object first", "long key"],
)
def test_a_misfit_after_a_slice_gives_evaluate_s_advice(tmp_path: Path, value: Any) -> None:
    # The advice for an array of objects names the key of the first entry in view.
    check(tmp_path, Structured(value), ["slice:..2 | keys:0..2", "slice:1.. | lines:1", "grep:x"])


def test_a_range_of_a_text_s_lines_is_left_to_the_text_index(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = store.store_sync(Text("one\ntwo\n"))
    with pytest.raises(NotIndexed):
        selected_view(store, blob_id, parse_selector("lines:2"))


def test_a_text_that_is_not_utf8_is_a_corrupt_blob(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path)
    blob_id = store.store_sync(Text("ok\nok\n"))
    (tmp_path / f"{blob_id}.txt").write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(BlobCorrupt, match="not UTF-8"):
        selected_view(store, blob_id, parse_selector("grep:caf"))
