"""Reading through an index gives byte for byte what reading the loaded blob gives: for
texts, arrays and objects, any selector, and an index that is fresh, deleted, stale,
damaged or cannot be written."""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.agent.policy import Policy
from core.content import Content, Structured, Text
from core.inspect_tool import InspectError, inspect_blob, render_inspect
from core.json_values import dumps_for_storage
from core.selectors import Key, SelectorError, explain, parse_selector
from core.store import FsBlobStore
from core.store.index import INDEX_FOLDER, index_path
from core.store.index import json_index as json_index_module
from core.store.index import text_index as text_index_module
from tests.core.strategies import json_values

STATES = ["fresh", "deleted", "stale", "damaged", "unwritable"]
OTHER_BLOB = "0190f5e2-7c1a-7b3e-9c4d-123456789abc"


@contextlib.contextmanager
def small_tables() -> Iterator[None]:
    """Blocks of 5 bytes, group records every 2 newlines and tables for every top-level
    container: every edge the index has falls inside the small examples."""
    saved = text_index_module.BLOCK, text_index_module.GROUP, json_index_module.CHILD_MIN
    text_index_module.BLOCK, text_index_module.GROUP, json_index_module.CHILD_MIN = 5, 2, 0
    try:
        yield
    finally:
        text_index_module.BLOCK, text_index_module.GROUP, json_index_module.CHILD_MIN = saved


def unindexed(blob_id: uuid.UUID, content: Content, selector: str | None, policy: Policy) -> str:
    """What inspect returns for the loaded blob (the path without an index)."""
    try:
        parsed = parse_selector(selector)
    except SelectorError as error:
        return f"error: {explain(error, content)}"
    try:
        return render_inspect(blob_id, content, parsed, policy)
    except SelectorError as error:
        return f"error: {error}"


def indexed(store: FsBlobStore, blob_id: uuid.UUID, selector: str | None, policy: Policy) -> str:
    try:
        return inspect_blob(store, str(blob_id), selector, policy)
    except InspectError as error:
        return f"error: {error}"


def put_in_state(store: FsBlobStore, blob_id: uuid.UUID, state: str) -> None:
    path = index_path(store.root, str(blob_id))
    if state == "deleted":
        path.unlink()
    elif state == "stale":  # another blob's index under this name: another size
        other = FsBlobStore(store.root.parent / "other", index_min_bytes=0)
        value = ["another", "blob"]
        if len(dumps_for_storage(value)) == store.size_sync(blob_id):  # (sizes tell them apart)
            value.append("!")
        other.put_sync(OTHER_BLOB, Structured(value))
        shutil.copy(index_path(other.root, OTHER_BLOB), path)
    elif state == "damaged":
        path.write_bytes(path.read_bytes()[:-3])
    elif state == "unwritable":  # no folder can be made where the index folder goes
        shutil.rmtree(store.root / INDEX_FOLDER)
        (store.root / INDEX_FOLDER).write_bytes(b"")


def check(
    tmp_path: Path, content: Content, selectors: list[str | None], state: str, policy: Policy
) -> None:
    with small_tables():
        store = FsBlobStore(tmp_path / "blobs", index_min_bytes=0)
        blob_id = store.store_sync(content)
        put_in_state(store, blob_id, state)
        loaded = store.load_sync(blob_id)
        loads: list[object] = []

        def load_sync(*args: Any) -> Content:
            loads.append(args)
            return loaded

        store.load_sync = load_sync  # type: ignore[method-assign]
        for selector in selectors:
            want = unindexed(blob_id, loaded, selector, policy)
            assert indexed(store, blob_id, selector, policy) == want, selector
    if state == "unwritable":
        assert (store.root / INDEX_FOLDER).is_file()
    # Only a JSON blob whose index cannot be written is loaded whole; a text never is.
    assert bool(loads) == (state == "unwritable" and isinstance(content, Structured))


policies = st.builds(
    lambda limit, head: Policy(inspect_limit=limit, inspect_head_lines=head),
    st.sampled_from([120, 300, 1000, 8000]),
    st.sampled_from([1, 3, 40]),
)

texts = st.lists(
    st.one_of(
        st.sampled_from(["", "a", "é€", "\U0001f600", "x\r", "\ud800", " \t", "\r"]),
        st.tuples(st.sampled_from(["a", "€", "\U0001f600"]), st.integers(1, 400)).map(
            lambda p: p[0] * p[1]
        ),
    ),
    max_size=30,
).flatmap(
    lambda lines: st.tuples(st.sampled_from(["\n", "\r\n"]), st.booleans()).map(
        lambda end: end[0].join(lines) + (end[0] if end[1] and lines else "")
    )
)
line_steps = st.builds(
    lambda a, b: f"lines:{a}{b}",
    st.integers(1, 35),
    st.sampled_from(["", "-", "-2", "-5", "-40"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    texts,
    st.lists(st.lists(line_steps, min_size=1, max_size=2).map(" | ".join), max_size=4),
    st.sampled_from(STATES),
    policies,
)
def test_texts_read_the_same_through_the_index(
    tmp_path_factory: pytest.TempPathFactory,
    text: str,
    selectors: list[str],
    state: str,
    policy: Policy,
) -> None:
    extra = ["slice:0..2", "key:a", "keys:0..1", "lines:ten"]
    check(tmp_path_factory.mktemp("t"), Text(text), [None, *selectors, *extra], state, policy)


def names_in(value: Any) -> list[str]:
    """Keys of an object and of the objects one level down."""
    names: list[str] = []
    if isinstance(value, dict):
        names += list(value)
        for item in value.values():
            if isinstance(item, dict):
                names += list(item)
    return names or ["a"]


def json_selectors(value: Any) -> st.SearchStrategy[list[str | None]]:
    ranges = st.builds(
        lambda a, incl, b: f"{'' if a is None else a}..{incl}{'' if b is None else b}",
        st.one_of(st.none(), st.integers(0, 7)),
        st.sampled_from(["", "="]),
        st.integers(0, 9),
    ).filter(lambda r: not r.endswith("..="))
    steps = st.one_of(
        st.builds("slice:{}".format, ranges),
        st.builds("keys:{}".format, ranges),
        st.builds(lambda name: str(Key(name)), st.sampled_from(names_in(value))),
        st.builds(lambda name: str(Key(name)), st.text(max_size=3)),
        st.sampled_from(["lines:1-3", "lines:2", "lines:9-"]),
    )
    chains = st.lists(steps, min_size=1, max_size=3).map(" | ".join)
    return st.lists(chains, max_size=6).map(lambda chosen: [None, *chosen])


big_strings = st.text(alphabet=st.sampled_from('ab€\U0001f600\n\r"\\'), max_size=600)
json_containers = st.one_of(
    st.lists(st.one_of(json_values, big_strings), max_size=12),
    st.dictionaries(
        st.text(alphabet=st.characters(codec=None), max_size=4),
        st.one_of(json_values, big_strings, st.lists(json_values, max_size=12)),
        max_size=12,
    ),
    json_values,
)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    json_containers.flatmap(lambda value: st.tuples(st.just(value), json_selectors(value))),
    st.sampled_from(STATES),
    policies,
)
def test_json_reads_the_same_through_the_index(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[Any, list[str | None]],
    state: str,
    policy: Policy,
) -> None:
    value, selectors = case
    check(tmp_path_factory.mktemp("j"), Structured(value), selectors, state, policy)


@pytest.mark.parametrize("state", STATES)
def test_a_large_object_and_array_read_the_same(tmp_path: Path, state: str) -> None:
    value = {
        f"key {n}": ("é" * (n % 30) if n % 3 else list(range(n % 50))) for n in range(3000)
    } | {"items": [{"n": n, "s": "x" * (n % 200)} for n in range(3000)]}
    selectors = [
        None,
        "keys:2990..",
        "keys:40..80",
        "key:items | slice:2990..3010",
        "key:items",
        "key:key 2999",
        "key:key 1500 | lines:1",
        "key:nope",
        "key:items | keys:0..1",
        "slice:0..1",
        "keys:5..3",
    ]
    policy = Policy()
    check(tmp_path, Structured(value), selectors, state, policy)
    check(
        tmp_path / "array",
        Structured(value["items"]),
        [None, "slice:1500..", "key:n"],
        state,
        policy,
    )
