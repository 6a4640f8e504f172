"""`keys:A..B` (docs/selectors.md): an object's key lines A..B, paged as `slice:` pages an array;
the object overview goes on with it; it chains and is a step of its own after `|`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from core.agent.policy import DEFAULT_POLICY
from core.content import Structured, Text
from core.inspect_tool import INSPECT_DESCRIPTION, InspectError, inspect_blob, render_inspect
from core.selectors import (
    Grep,
    Keys,
    KeysView,
    Selector,
    SelectorError,
    evaluate,
    parse_selector,
)
from core.store import FsBlobStore

REPO = Path(__file__).resolve().parents[2]
BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
REF = f"[blob:{BLOB_ID}]"
TRAILER = re.compile(r"^… truncated — continue with (.+)$")
VALUE = {"results": [1, 2], "log": "a\nb", "meta": {}, "n": 1.5, "ok": None}


def render(value: object, selector: str | None) -> str:
    return render_inspect(BLOB_ID, Structured(value), selector, DEFAULT_POLICY)


@pytest.mark.parametrize(
    ("text", "step"),
    [
        ("keys:0..10", Keys(0, 10)),
        ("keys:5..", Keys(5, None)),
        ("keys:..3", Keys(None, 3)),
        ("keys:2..=4", Keys(2, 4, inclusive=True)),
        ("keys:..", Keys(None, None)),
        (" KEYS : 1 .. 2 ", Keys(1, 2)),
    ],
)
def test_it_parses_rust_ranges(text: str, step: Keys) -> None:
    assert parse_selector(text) == Selector((step,))
    assert parse_selector(str(step)) == Selector((step,))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("keys:x", "keys: expects a range of key indexes from 0: A..B, A.., ..B, A..=B or .."),
        ("keys:3..1", "keys:3..1: the start is after the end"),
        ("keys:0..=", "keys: ..= needs an end, e.g. keys:0..=9"),
        ('keys:"a"', "keys: expects a range of key indexes"),
    ],
)
def test_a_malformed_range_is_a_one_line_error(text: str, message: str) -> None:
    with pytest.raises(SelectorError, match=re.escape(message)):
        parse_selector(text)


def test_it_is_a_step_of_its_own_after_a_pipe_even_after_grep() -> None:
    steps = parse_selector("grep:a|b | keys:0..2").steps
    assert isinstance(steps[0], Grep) and steps[0].pattern == "a|b"
    assert steps[1] == Keys(0, 2)
    with pytest.raises(SelectorError) as error:
        evaluate("grep:a | keys:0..2", Text("a\nb"))
    assert str(error.value) == (
        "keys: applies to a JSON object; grep:a gives grep result — grep: must be the last step"
    )


def test_it_selects_key_lines_with_their_shapes() -> None:
    view = evaluate("keys:1..3", Structured(VALUE))
    assert view == KeysView([("log", "string(3)"), ("meta", "object{0}")], 1, 5)
    assert (
        render(VALUE, "keys:1..3")
        == f"{REF} keys 1..3 of 5 keys\nlog: string(3)\nmeta: object{{0}}"
    )


def test_ends_are_clamped_and_an_empty_range_has_just_its_header() -> None:
    assert render(VALUE, "keys:3..99") == f"{REF} keys 3..5 of 5 keys\nn: number\nok: null"
    assert render(VALUE, "keys:9..") == f"{REF} keys 5..5 of 5 keys"
    assert render({}, "keys:..") == f"{REF} keys 0..0 of 0 keys"


def test_keys_after_keys_narrows_and_counts_in_the_whole_object() -> None:
    assert render(VALUE, "keys:1..4 | keys:2..") == (
        f"{REF} keys:1..4 | keys:2.. → keys 2..4 of 5 keys\nmeta: object{{0}}\nn: number"
    )


def test_it_chains_after_key() -> None:
    value = {"config": {f"option{n}": n for n in range(300)}}
    assert render(value, "key:config | keys:100..102") == (
        f"{REF} key:config | keys:100..102 → keys 100..102 of 300 keys\n"
        "option100: number\noption101: number"
    )


@pytest.mark.parametrize(
    ("content", "selector", "message"),
    [
        (
            Structured([1, 2]),
            "keys:0..1",
            "keys: applies to a JSON object; this blob is json_array — try slice:0..10",
        ),
        (
            Text("a"),
            "keys:0..1",
            "keys: applies to a JSON object; this blob is text — try lines:1-40 or grep:<regex>",
        ),
        (
            Structured(VALUE),
            "keys:0..2 | key:log",
            "key: applies to a JSON object; keys:0..2 gives key lines"
            " — only keys: may follow keys:",
        ),
        (
            Structured(VALUE),
            "keys:0..2 | lines:1",
            "lines: applies to text; keys:0..2 gives key lines — only keys: may follow keys:",
        ),
    ],
)
def test_it_applies_to_objects_only(
    content: Structured | Text, selector: str, message: str
) -> None:
    with pytest.raises(SelectorError) as error:
        evaluate(selector, content)
    assert str(error.value) == message


def test_the_object_overview_goes_on_with_keys(store: FsBlobStore) -> None:
    value = {f"key number {n}": "x" * n for n in range(2000)}
    blob_id = store.store_sync(Structured(value))
    result = inspect_blob(store, str(blob_id))
    trailer = TRAILER.match(result.split("\n")[-1])
    assert trailer is not None
    shown = len(result.split("\n")) - 3  # header, "── keys ──", trailer
    assert trailer.group(1) == f"keys:{shown}.."
    following = inspect_blob(store, str(blob_id), trailer.group(1))
    assert following.split("\n")[1] == f"key number {shown}: string({shown})"


def test_reading_on_through_key_lines_reads_every_key_once(store: FsBlobStore) -> None:
    value = {f"k{n}": [n] * (n % 7) for n in range(3000)}
    blob_id = store.store_sync(Structured(value))
    lines: list[str] = []
    selector = "keys:10..=2500"
    pages = 0
    while True:
        header, *body = inspect_blob(store, str(blob_id), selector).split("\n")
        assert header.startswith(f"[blob:{blob_id}] keys ")
        trailer = TRAILER.match(body[-1]) if body else None
        if trailer is None:
            lines += body
            break
        lines += body[:-1]
        selector = trailer.group(1)
        assert selector.endswith("..2501")
        pages += 1
    assert lines == [f"k{n}: array[{n % 7}]" for n in range(10, 2501)]
    assert pages > 3


def test_the_tool_says_what_keys_does() -> None:
    assert "keys:40..80" in INSPECT_DESCRIPTION


def test_an_error_reaches_the_model_as_one_line(store: FsBlobStore) -> None:
    blob_id = store.store_sync(Structured([1, 2, 3] * 400))
    with pytest.raises(InspectError) as error:
        inspect_blob(store, str(blob_id), "keys:0..5")
    assert str(error.value) == (
        "keys: applies to a JSON object; this blob is json_array — try slice:0..10"
    )


def test_the_cli_prints_key_lines(tmp_path: Path) -> None:
    store = FsBlobStore(tmp_path / "blobs")
    blob_id = store.store_sync(Structured(VALUE))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "inspect",
            "--dir",
            str(store.root),
            str(blob_id),
            "keys:3..",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"[blob:{blob_id}] keys 3..5 of 5 keys\nn: number\nok: null"
