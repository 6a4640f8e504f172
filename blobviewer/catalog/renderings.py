"""A big JSON blob's indented rendering in `derived/`: what its pages show without a
selector, read a page at a time through the rendering's own line index (in `derived/`'s
`.index/`, beside it).

The rendering is written an entry at a time through the blob's index (core.store.index): each
top-level entry or key is parsed and indented alone, and a big top-level value one level
down, so writing it never holds the whole value. It is the same text as
`dumps_indented(value)`, since indenting JSON is the same whether a value stands alone or
inside another (only its lines move right by two spaces a level).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from blobviewer.data_dir import renderings
from core.content import Text, encode_text
from core.json_values import dumps_compact, dumps_indented, parse_json
from core.store import BlobStore, BlobStoreError
from core.store.index import JsonIndex, open_index
from core.store.index.json_index import Node, key_from_literal

_WRITE_BUFFER = 1 << 20


def write_rendering(blob_id: uuid.UUID, index: JsonIndex) -> bool:
    """Write the rendering of the JSON blob that *index* describes, and its line index;
    False when it is there already (blobs are immutable, so is their rendering)."""
    store = renderings()
    if store.exists_sync(blob_id):
        return False
    try:
        written = store.put_stream_sync(blob_id, "text", _encoded(indented(index, index.root())))
    except TypeError:  # as dumps_indented, by the standard library when orjson cannot
        chunks = indented(index, index.root(), dumps=_standard_indented)
        written = store.put_stream_sync(blob_id, "text", _encoded(chunks))
    _index(store, blob_id)
    return written


def write_rendering_of_value(blob_id: uuid.UUID, value: Any) -> bool:
    """The same for a blob read whole (one its index cannot describe)."""
    store = renderings()
    written = store.put_sync(blob_id, Text(dumps_indented(value)))
    _index(store, blob_id)
    return written


def _encoded(chunks: Iterator[str]) -> Iterator[bytes]:
    """The UTF-8 of *chunks* in pieces of about _WRITE_BUFFER bytes (a rendering comes in
    many small strings; a store writes, or uploads, big pieces better)."""
    pending: list[bytes] = []
    size = 0
    for chunk in chunks:
        data = encode_text(chunk)
        pending.append(data)
        size += len(data)
        if size >= _WRITE_BUFFER:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


def _orjson_indented(value: Any) -> str:
    """dumps_indented's first choice; raises TypeError where it turns to the standard
    library (integers beyond 64 bits, lone surrogates). The whole rendering then does too,
    as dumps_indented of the whole value would."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _standard_indented(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)


def _index(store: BlobStore, blob_id: uuid.UUID) -> None:
    """Make the rendering's line index now, so its first page does not."""
    with contextlib.suppress(BlobStoreError, OSError):
        index = open_index(store, blob_id, min_bytes=0)
        if index is not None:
            index.close()


def indented(
    index: JsonIndex,
    node: Node,
    depth: int = 0,
    *,
    dumps: Callable[[Any], str] = _orjson_indented,
) -> Iterator[str]:
    """The text of `dumps_indented` for *node*, as if it stood *depth* levels deep (every
    line after its first moved right by two spaces a level), a piece at a time.

    Entries (or keys) are read and parsed a run of about a MB at a time and indented
    together; a value with a table of its own is taken alone, one level down."""
    pad = "  " * depth
    table = node.table
    if table is None or not table.count:
        yield _moved(dumps(index.value(node)), pad)
        return
    opening, closing = ("[", "]") if node.kind == "array" else ("{", "}")
    yield opening
    separator = "\n"
    for run in _runs(index, node):
        if isinstance(run, tuple):  # a key whose value has its own table
            name, child = run
            yield f"{separator}{pad}  {dumps_compact(name)}: "
            yield from indented(index, child, depth + 1, dumps=dumps)
        else:  # "[\n  a,\n  b\n]" holds the run's entries as they sit in the container
            yield separator + _moved(dumps(run)[2:-2], pad, first=True)
        separator = ",\n"
    yield "\n" + pad + closing


def _moved(text: str, pad: str, *, first: bool = False) -> str:
    if not pad:
        return text
    return (pad if first else "") + text.replace("\n", "\n" + pad)


def _runs(index: JsonIndex, node: Node) -> Iterator[Any]:
    """The entries or keys of *node* as parsed runs (a list, or a dict), each read with one
    read of about _RUN bytes; a key whose value has a table comes alone, as (name, node)."""
    table = node.table
    assert table is not None
    first = last = -1  # the run's bytes, first..last
    if node.kind == "array":
        for start, end in index.spans(table, 0, table.count):
            if first >= 0 and end - first > _RUN:
                yield _parse(index, b"[", first, last, b"]")
                first = -1
            first, last = (start if first < 0 else first), end
        if first >= 0:
            yield _parse(index, b"[", first, last, b"]")
        return
    for child, key_at in index.key_spans(table, 0, table.count, tables=True):
        if child.table is not None or (first >= 0 and child.end - first > _RUN):
            if first >= 0:
                yield _parse(index, b"{", first, last, b"}")
            first = -1
        if child.table is not None:
            name = key_from_literal(index.blob.exact(key_at, child.start - 1 - key_at))
            yield name, child
            continue
        first, last = (key_at if first < 0 else first), child.end
    if first >= 0:
        yield _parse(index, b"{", first, last, b"}")


_RUN = 1 << 20


def _parse(index: JsonIndex, opening: bytes, first: int, last: int, closing: bytes) -> Any:
    return parse_json(opening + index.blob.exact(first, last - first) + closing)
