"""The built-in `inspect` tool: what the model reads of a stored blob (docs/selectors.md).

The result starts with a header line `[blob:<id>] ...`, then the selected content, and
never exceeds ``policy.inspect_limit`` bytes: it stops at the last whole line that fits
and ends with `… truncated — continue with <selector>`, naming the exact next selector.

Every blob is read through its blob index (core.inspect_render): the one its store keeps
(`.index/`, for a big blob), or one built in memory over its bytes once it is loaded. A
`grep:` over a text that has no index at all is streamed from the blob's file, its lines
counted on the way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.agent.policy import DEFAULT_POLICY, Policy
from core.agent.tools import ToolError
from core.content import Content, Inline, Structured, Text, ToolOutput
from core.grep import blob_blocks, count_lines_in
from core.inspect_render import grep_page, render_through_index, render_view
from core.selectors import (
    Grep,
    Lines,
    LinesView,
    Selector,
    SelectorError,
    apply_steps,
    explain,
    grep_blocks,
    parse_selector,
)
from core.store import BlobStore
from core.store.blob_id import BlobId, parse_blob_id
from core.store.errors import BlobStoreError, IndexUnusable, StoreUnavailable
from core.store.index import BlobIndex, TextIndex, index_in_memory, open_index
from core.store.index.selection import stand_in

INSPECT_NAME = "inspect"
INSPECT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "blob_id": {
            "type": "string",
            "description": "The id in a [blob:<id>] reference, e.g. 0190f5e2-...",
        },
        "selector": {
            "type": "string",
            "description": "Which part to read; omit it for an overview. See the description.",
        },
    },
    "required": ["blob_id"],
    "additionalProperties": False,
}
INSPECT_DESCRIPTION = """\
Read a stored tool output. Large tool outputs are not put in the conversation: you see a \
summary that starts with [blob:<id>]. Call inspect with that id to read more of it.
Without a selector you get the kind, size and beginning of the blob. Selectors:
- lines:20-50  lines 20 to 50 of a text (numbered from 1); lines:20 one line; lines:20- to the end
- slice:3..8   entries 3 to 7 of a JSON array (from 0, end excluded); also 3.. ..8 3..=8
- key:results  the value of one key of a JSON object; key:"a|b" quotes a key with | in it
- keys:40..80  key lines 40 to 79 of a JSON object (name and shape), paged like slice:
- grep:regex   the lines of a text that match an RE2 regex, as <line number>: <line>; RE2 has \
no backreferences and no lookaround; a page of matches ends with the selector that reads on
Chain steps with |, e.g. key:results | slice:0..5  or  key:log | grep:ERROR  or \
lines:100-200 | grep:def . Results are capped at about 8 KB; a cut result ends with \
"continue with <selector>" naming the selector that reads on."""


class InspectError(Exception):
    """Unknown or malformed blob id, missing blob, or a bad selector; one-line message."""


async def inspect_blob_async(
    store: BlobStore, blob_id: str, selector: str | None = None, policy: Policy = DEFAULT_POLICY
) -> str:
    """What the inspect tool returns for *blob_id* and *selector*; raises InspectError."""
    parsed_id, parsed = _parsed(blob_id, selector)
    if isinstance(store, BlobStore):  # it reads by range (a bare async store only loads)
        args = (store, parsed_id, parsed, policy)
        if (result := await asyncio.to_thread(_from_store, *args)) is not None:
            return result
    try:
        content = await store.load(parsed_id)
    except StoreUnavailable:
        raise  # not an answer about the blob: the caller says the store is not answering
    except BlobStoreError as error:
        raise InspectError(str(parsed if isinstance(parsed, SelectorError) else error)) from None
    return _from_content(parsed_id, content, parsed, policy)


def inspect_blob(
    store: BlobStore, blob_id: str, selector: str | None = None, policy: Policy = DEFAULT_POLICY
) -> str:
    """:func:`inspect_blob_async` for synchronous callers (the CLI, the web site)."""
    parsed_id, parsed = _parsed(blob_id, selector)
    if (result := _from_store(store, parsed_id, parsed, policy)) is not None:
        return result
    try:
        content = store.load_sync(parsed_id)
    except StoreUnavailable:
        raise  # not an answer about the blob: the caller says the store is not answering
    except BlobStoreError as error:
        raise InspectError(str(parsed if isinstance(parsed, SelectorError) else error)) from None
    return _from_content(parsed_id, content, parsed, policy)


def render_inspect(
    blob_id: BlobId, content: Content, selector: Selector | str | None, policy: Policy
) -> str:
    """The inspect result for *content*, a blob's content in memory, read as a stored blob
    is read (through an index, built in memory over its bytes); raises SelectorError for a
    selector that does not parse or misfits."""
    if not isinstance(selector, Selector):
        selector = parse_selector(selector)
    with index_in_memory(content) as index:
        return render_through_index(blob_id, index, selector, policy)


def _parsed(blob_id: str, selector: str | None) -> tuple[BlobId, Selector | SelectorError]:
    """The blob id (or InspectError), and the selector or why it does not parse: that
    error is raised once the blob is opened, so it can say which selectors fit it (or
    as it is, when the blob cannot be read)."""
    try:
        parsed_id = parse_blob_id(blob_id)
    except BlobStoreError as error:
        raise InspectError(str(error)) from None
    try:
        return parsed_id, parse_selector(selector)
    except SelectorError as error:
        return parsed_id, error


def _from_store(
    store: BlobStore, blob_id: BlobId, selector: Selector | SelectorError, policy: Policy
) -> str | None:
    """The result read from the blob by range, through the index its store keeps (or, for
    a text, one built in memory from the blob's file), so only what is shown is read. None
    when the blob is to be loaded instead: a small JSON blob (its store keeps no index of
    it), or one whose index turned out stale or damaged."""
    try:
        index = open_index(store, blob_id, min_bytes=store.index_min_bytes)
    except StoreUnavailable:
        raise
    except (BlobStoreError, OSError):
        index = None  # loading it says what is wrong
    if index is None:
        return _grep_unindexed(store, blob_id, selector, policy)
    try:
        with index:
            return _rendered(blob_id, index, selector, policy)
    except IndexUnusable:
        return None
    except UnicodeDecodeError:
        if not isinstance(index, TextIndex):
            return None  # loading it names the damage
        raise InspectError(f"blob {blob_id} is not UTF-8 text") from None
    except StoreUnavailable:
        raise
    except OSError as error:
        raise InspectError(f"cannot read blob {blob_id}: {error.strerror}") from None


def _from_content(
    blob_id: BlobId, content: Content, selector: Selector | SelectorError, policy: Policy
) -> str:
    """The result for the loaded blob, read through an index built in memory."""
    try:
        index = index_in_memory(content)
    except IndexUnusable as error:
        raise InspectError(f"cannot read blob {blob_id}: {error}") from None
    with index:
        return _rendered(blob_id, index, selector, policy)


def _rendered(
    blob_id: BlobId, index: BlobIndex, selector: Selector | SelectorError, policy: Policy
) -> str:
    """The result read through *index*; InspectError for a selector that does not parse
    (saying which selectors fit this blob) or does not fit."""
    if isinstance(selector, SelectorError):
        if isinstance(index, TextIndex):
            raise InspectError(explain(selector, Text("")))
        raise InspectError(explain(selector, Structured(stand_in(index, index.root()).value)))
    try:
        return render_through_index(blob_id, index, selector, policy)
    except SelectorError as error:
        raise InspectError(str(error)) from None


def _grep_unindexed(
    store: BlobStore, blob_id: BlobId, selector: Selector | SelectorError, policy: Policy
) -> str | None:
    """`[lines:A-B |]* grep:P` of a text blob that has no index (one could not be made),
    streamed from its file in blocks: the lines before A are counted on the way, and the
    text's line count is known only when a `lines:` step needs it or the search reaches
    the end. None for other selectors or blobs (they are loaded instead)."""
    if not isinstance(selector, Selector) or not selector:
        return None
    *narrowing, grep = selector.steps
    if not isinstance(grep, Grep) or not all(isinstance(step, Lines) for step in narrowing):
        return None
    try:
        blob = store.open_sync(blob_id)
    except StoreUnavailable:
        raise
    except BlobStoreError:
        return None  # loading it says what is wrong
    try:
        with blob:
            if blob.kind != "text":
                return None
            total, first, last = None, 1, None
            if narrowing:
                total = count_lines_in(blob)
                # The lines: steps on a text-less view give core's numbers and errors.
                lines = apply_steps(Selector(tuple(narrowing)), LinesView("", 1, total, total))
                assert isinstance(lines, LinesView)
                first, last = lines.first, lines.last
            page = grep_page(blob_id, selector, policy)
            blocks = blob_blocks(blob, first)
            view = grep_blocks(grep, blocks, first=first, last=last, total=total, page=page)
    except SelectorError as error:
        raise InspectError(str(error)) from None
    except UnicodeDecodeError:
        raise InspectError(f"blob {blob_id} is not UTF-8 text") from None
    except OSError as error:
        raise InspectError(f"cannot read blob {blob_id}: {error.strerror}") from None
    return render_view(blob_id, view, selector, policy)


@dataclass(frozen=True, slots=True)
class InspectTool:
    """The built-in `inspect` tool over a blob store (docs/selectors.md).

    It returns its result as Inline, so the result is never promoted; bad ids, missing
    blobs and bad selectors come back as ToolError with the one-line message.
    """

    store: BlobStore
    policy: Policy = DEFAULT_POLICY
    name: str = INSPECT_NAME
    description: str = INSPECT_DESCRIPTION
    parameters: Mapping[str, Any] = field(default_factory=lambda: INSPECT_PARAMETERS)

    async def execute(self, args: dict[str, Any]) -> str:
        try:
            return await inspect_blob_async(
                self.store, args["blob_id"], args.get("selector"), self.policy
            )
        except (InspectError, StoreUnavailable) as error:
            raise ToolError(str(error)) from None

    async def execute_output(self, args: dict[str, Any]) -> ToolOutput:
        return Inline(await self.execute(args))
