"""Big JSON without a gigabyte (docs/promotion.md, docs/store.md): a big JSON output is promoted
entry by entry (core.json_stream) into exactly the bytes, value and summary the whole-value path
gives; integers beyond 64 bits stay exact on every path; parse_json needs no Python-regex
pre-scan; promotion's peak memory stays within twice the output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import core.json_stream
from core.agent.policy import Policy
from core.content import Structured, Text
from core.inspect_tool import inspect_blob
from core.json_stream import PromotedJson
from core.json_values import JsonError, dumps_for_storage, parse_json
from core.promotion import admit_sync, promote
from core.store import FsBlobStore
from core.summary import summarize

REPO = Path(__file__).resolve().parents[2]
BLOB_ID = uuid.UUID("0190f5e2-7c1a-7b3e-9c4d-123456789abc")
ALWAYS = Policy(inline_limit=0)  # every output is Stored
BIG = 123456789012345678901234567890  # 30 digits: beyond 64 bits


def whole_value_promotion(output: str) -> Text | Structured:
    """Promotion as it was: parse the whole output (parse_json), keep it if writable."""
    if output.lstrip()[:1] in ("[", "{"):
        try:
            value = parse_json(output)
        except JsonError:
            return Text(output)
        if isinstance(value, list | dict):
            try:
                dumps_for_storage(value)
            except (TypeError, ValueError, RecursionError):
                return Text(output)
            return Structured(value)
    return Text(output)


def streamed(output: str, policy: Policy = ALWAYS) -> Text | Structured:
    """promote() with streaming used whatever the size."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(core.json_stream, "STREAM_FROM_CHARS", 0)
        promoted = promote(output, policy)
    assert not isinstance(promoted, str)
    return promoted.content  # type: ignore[union-attr]


def stored_bytes(content: Text | Structured) -> bytes:
    return FsBlobStore._encode(content)[0]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    st.sampled_from(["é", "😀", "\u2028", '"', "\\", "\x00", "\x1f", "/", "\ud800"]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=25,
)
containers = st.one_of(
    st.lists(values, max_size=8), st.dictionaries(st.text(max_size=4), values, max_size=8)
)


def render(value: Any, style: int) -> str:
    if style == 0:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if style == 1:
        return json.dumps(value)  # ASCII escapes: surrogate pairs for emoji
    return json.dumps(value, ensure_ascii=False, indent=2)


def mutate(text: str, how: int, where: int) -> str:
    at = where % (len(text) + 1)
    return [
        lambda: text,
        lambda: text[:at],  # cut short: not JSON
        lambda: f"  \n{text}\t\r\n",
        lambda: text[:at] + "\x0b" + text[at:],  # whitespace to yajl, not to orjson
        lambda: text + " []",  # trailing garbage
        lambda: text.replace("{", '{"k":1,"k":2,', 1),  # a repeated key
        lambda: text.replace("[", '["\\ud800",', 1),  # a lone surrogate escape
        lambda: text.replace("[", '["\\udc00\\ud800",', 1),  # a pair in the wrong order
        lambda: text.replace("[", "[18446744073709551615,-9223372036854775809,", 1),
    ][how]()


@settings(max_examples=400, deadline=None)
@given(containers, st.integers(0, 2), st.integers(0, 8), st.integers(0, 10_000))
def test_streamed_promotion_gives_the_bytes_value_and_summary_of_the_whole_value_path(
    value: Any, style: int, how: int, where: int
) -> None:
    output = mutate(render(value, style), how, where)
    assume(output)  # "" stays Inline whatever the policy
    expected = whole_value_promotion(output)
    content = streamed(output)
    assert isinstance(content, Text) == isinstance(expected, Text)
    if isinstance(expected, Text):
        assert content == expected
        return
    assert stored_bytes(content) == stored_bytes(expected)
    assert summarize(BLOB_ID, content) == summarize(BLOB_ID, expected)
    tiny = Policy(summary_limit=120, json_head_entries=3)
    assert summarize(BLOB_ID, content, tiny) == summarize(BLOB_ID, expected, tiny)
    assert content.value == expected.value


def big_array(entries: int) -> str:
    rows = (
        {"id": n, "name": f"item {n}", "tags": ["a", "é"], "score": n / 8, "ok": n % 2 == 0}
        for n in range(entries)
    )
    return "[" + ",".join(orjson.dumps(row).decode() for row in rows) + "]"


def test_a_big_array_is_streamed_not_parsed_whole() -> None:
    output = big_array(20_000)
    content = promote(output).content  # type: ignore[union-attr]
    assert isinstance(content, PromotedJson) and len(output) >= core.json_stream.STREAM_FROM_CHARS
    assert stored_bytes(content) == orjson.dumps(orjson.loads(output))
    assert summarize(BLOB_ID, content) == summarize(BLOB_ID, Structured(orjson.loads(output)))
    assert content.kind == "json_array" and content.facts.count == 20_000


def test_a_big_object_is_streamed_and_its_summary_counts_every_key() -> None:
    output = json.dumps({f"key {n}": {"n": n, "s": "x" * (n % 50)} for n in range(30_000)})
    content = promote(output).content  # type: ignore[union-attr]
    assert isinstance(content, PromotedJson)
    assert stored_bytes(content) == orjson.dumps(orjson.loads(output))
    summary = summarize(BLOB_ID, content)
    assert summary == summarize(BLOB_ID, Structured(orjson.loads(output)))
    assert summary.startswith(f"[blob:{BLOB_ID}] json_object | 30000 keys")


def test_a_big_output_cut_short_is_text_without_a_whole_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    output = big_array(20_000)[:-100]

    def refuse(*_: object) -> None:
        raise AssertionError("the whole output was parsed")

    monkeypatch.setattr("core.promotion.parse_json", refuse)
    assert promote(output).content == Text(output)  # type: ignore[union-attr]


def test_a_repeated_top_level_key_keeps_its_last_value_in_its_first_place() -> None:
    output = '{"a":1,"b":2,"a":3,' + ",".join(f'"k{n}":{n}' for n in range(200_000)) + "}"
    content = promote(output).content  # type: ignore[union-attr]
    assert not isinstance(content, PromotedJson)
    assert stored_bytes(content).startswith(b'{"a":3,"b":2,"k0":0')


# -- integers beyond 64 bits stay exact on every path ------------------------------------------


@pytest.fixture(scope="module")
def deep_integer_array() -> str:
    """About 30 MB of entries with a 30-digit integer in the first entry and deep inside."""
    rows = [f'{{"id":{n},"name":"item {n}","score":{n / 4}}}' for n in range(400_000)]
    rows[0] = f'{{"id":0,"big":{BIG}}}'
    rows[399_990] = f'{{"id":399990,"deep":{{"big":[{BIG},-{BIG}]}}}}'
    return "[" + ",".join(rows) + "]"


def test_a_30_digit_integer_deep_in_a_big_array_stays_exact_on_every_path(
    deep_integer_array: str, store: FsBlobStore
) -> None:
    output = deep_integer_array
    assert len(output) > 10 * core.json_stream.STREAM_FROM_CHARS
    promoted = promote(output)
    content = promoted.content  # type: ignore[union-attr]
    assert content.value[399_990] == {"id": 399990, "deep": {"big": [BIG, -BIG]}}
    admitted = admit_sync(promoted, store)
    assert str(BIG) in admitted.text  # the summary shows the first entry exactly
    blob_id = admitted.blob_id
    assert blob_id is not None
    path = store.path_of(blob_id)
    assert f"[{BIG},-{BIG}]".encode() in path.read_bytes()
    assert store.load_sync(blob_id).value[0]["big"] == BIG  # type: ignore[union-attr]
    deep = inspect_blob(store, str(blob_id), "slice:399990..399991")
    assert deep.split("\n")[1] == f'{{"id":399990,"deep":{{"big":[{BIG},-{BIG}]}}}}'
    nested = inspect_blob(store, str(blob_id), "slice:0..1")
    assert nested.split("\n")[1] == f'{{"id":0,"big":{BIG}}}'
    assert parse_json(output.encode())[399_990]["deep"]["big"][1] == -BIG


def test_a_30_digit_integer_is_exact_through_key_and_summary_of_an_object(
    store: FsBlobStore,
) -> None:
    output = "{" + ",".join(f'"k{n}":{n}' for n in range(300_000)) + f',"big":{{"n":{BIG}}}}}'
    admitted = admit_sync(promote(output), store)
    assert admitted.blob_id is not None
    result = inspect_blob(store, str(admitted.blob_id), "key:big")
    assert result.split("\n")[1:] == ["{", f'  "n": {BIG}', "}"]


@pytest.mark.parametrize("digits", ["1" * 19, "9" * 20, "-" + "9" * 19, "1" * 18 + "é" + "2" * 18])
def test_parse_json_finds_long_integers_across_its_scan_chunks(
    digits: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("core.json_values._SCAN_CHARS", 7)  # runs cross chunk edges
    text = f'["{"x" * 5}", {digits}]' if "é" not in digits else f'["{digits}", 1]'
    expected = json.loads(text)
    assert parse_json(text) == expected
    assert parse_json(text.encode()) == expected
    assert type(parse_json(text)[-1]) is type(expected[-1])


def test_parse_json_has_no_python_regex_pre_scan() -> None:
    source = Path(core.json_values.__file__).read_text()  # type: ignore[attr-defined]
    assert not re.search(r"re\.compile\(r?\"\\\\d\{19", source)


# -- memory ----------------------------------------------------------------------------------

MEMORY_SCRIPT = textwrap.dedent(
    """
    import sys, uuid
    sys.path.insert(0, sys.argv[1])
    import orjson
    from core.store import FsBlobStore
    from core.promotion import admit_sync, promote

    def kib(field):
        for line in open("/proc/self/status"):
            if line.startswith(field):
                return int(line.split()[1])

    rows = (
        {"id": n, "name": f"item {n}", "tags": ["a", "b"], "score": n / 8, "nested": {"x": n}}
        for n in range(300_000)
    )
    output = "[" + ",".join(orjson.dumps(row).decode() for row in rows) + "]"
    del rows
    start = kib("VmRSS:")
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from here
    admitted = admit_sync(promote(output), FsBlobStore(sys.argv[2]))
    print(start, kib("VmHWM:"), len(output), admitted.text.split("\\n")[0])
    """
)


def test_promoting_a_big_array_peaks_within_twice_the_output_above_the_start(
    tmp_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(REPO), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    start, peak, size, header = run.stdout.split(" ", 3)
    growth = (int(peak) - int(start)) * 1024 / int(size)
    assert growth <= 2, (
        f"peak {growth:.2f}x the output ({int(size) / 2**20:.0f} MB) above the start"
    )
    assert header.strip().endswith("json_array | 300000 entries")
