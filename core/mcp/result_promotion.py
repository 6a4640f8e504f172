"""A tool result from an MCP server, promoted as the Worker promotes a tool output.

The unit is the result, not each content block (docs/mcp.md#what-the-proxy-does-to-a-result):
- `structuredContent` over the inline limit becomes one JSON blob, and its summary
  replaces it. SDK servers also send the same JSON as a text block; that block is the
  same output, so it is dropped, not stored twice. A `structuredContent` that only wraps
  the text blocks' output in one key (how SDKs send a plain string result under an
  output schema) is that text: the text rule below stores it, once.
- Otherwise the text blocks, joined by newlines, go through core's promotion: over the
  limit they become one blob (text, or JSON when the text is JSON) and the summary takes
  their place. Text in a wrapper (core.tool_text: content blocks encoded as a JSON string,
  `{"content": text}`) is stored as the text it holds.
- Images, audio, embedded resources and links pass through untouched, and every blob
  gets a `resource_link` to `blob://<id>`. A result with nothing to promote is returned
  as the very same dict, so small results reach the agent byte for byte. `isError`
  and `_meta` are kept.
- Before any of that, secrets in its text and JSON are redacted (core.redaction): the
  agent, the store and the log see `[redacted:<kind>]` in their place.

Results here are the wire's dicts (camelCase keys), as the proxy receives them.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any

from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Stored, Structured
from core.json_values import JsonError, dumps_for_storage, parse_json
from core.mcp.blobs import blob_uri
from core.promotion import admit_sync, promote
from core.redaction import redact_json
from core.store import BlobStore
from core.store.blob_id import BlobId
from core.store.errors import BlobStoreError
from core.tool_text import unwrap_text

_TEXT_JOINER = "\n"
_MIME_OF_KIND = {True: "application/json", False: "text/plain"}


@dataclass(frozen=True, slots=True)
class PromotedResult:
    """What the agent gets for one tool result, and the blobs it was stored as."""

    result: dict[str, Any]
    text: str  # the text blocks the agent reads, joined: what the session log records
    blob_ids: tuple[BlobId, ...] = ()
    redactions: int = 0  # secrets redacted out of the result


def promote_result(
    raw: dict[str, Any], store: BlobStore, policy: Policy = DEFAULT_POLICY
) -> PromotedResult:
    """Promote the CallToolResult *raw*; blocking (it writes blobs): run it in a thread."""
    redacted, redactions = redact_json(
        {k: raw[k] for k in ("content", "structuredContent") if k in raw}
    )
    if redactions:
        raw = {**raw, **redacted}
    promoted = _promoted(raw, store, policy)
    return replace(promoted, redactions=redactions) if redactions else promoted


def _promoted(raw: dict[str, Any], store: BlobStore, policy: Policy) -> PromotedResult:
    content = raw.get("content")
    blocks: list[Any] = content if isinstance(content, list) else []
    texts = {i: text for i, block in enumerate(blocks) if (text := _text_of(block)) is not None}
    summaries: list[str] = []
    stored: list[tuple[BlobId, bool]] = []  # the blob, and whether it holds JSON
    dropped: set[int] = set()
    stored_structured = False

    structured = raw.get("structuredContent")
    wraps_text = _wraps_text(structured, list(texts.values()))
    if (
        structured is not None
        and not wraps_text
        and len(dumps_for_storage(structured)) > policy.inline_limit
    ):
        admitted = admit_sync(Stored(Structured(structured)), store, policy)
        assert admitted.blob_id is not None  # a Stored output is always stored
        summaries.append(admitted.text)
        stored.append((admitted.blob_id, True))
        stored_structured = True
        # The SDKs serialize structuredContent into a text block as well: the same output.
        dropped.update(index for index, text in texts.items() if _same_json(text, structured))

    remaining = [index for index in texts if index not in dropped]
    if remaining:
        joined = _TEXT_JOINER.join(texts[index] for index in remaining)
        # A text block that holds text in a wrapper (core.tool_text) is stored as that text.
        unwrapped = unwrap_text(joined)
        output = promote(joined if unwrapped is None else unwrapped.text, policy)
        if isinstance(output, Stored):
            admitted = admit_sync(output, store, policy)
            assert admitted.blob_id is not None  # a Stored output is always stored
            summaries.append(admitted.text)
            stored.append((admitted.blob_id, isinstance(output.content, Structured)))
            dropped.update(remaining)

    if not stored:
        return PromotedResult(raw, _TEXT_JOINER.join(texts.values()))
    new_blocks = _replace_blocks(blocks, dropped, summaries)
    new_blocks.extend(_resource_link(store, blob_id, is_json) for blob_id, is_json in stored)
    result = dict(raw)
    if stored_structured or wraps_text:  # it would hold the whole output again
        result.pop("structuredContent", None)
    result["content"] = new_blocks
    agent_text = _TEXT_JOINER.join(
        text for block in new_blocks if (text := _text_of(block)) is not None
    )
    return PromotedResult(result, agent_text, tuple(blob_id for blob_id, _ in stored))


def _text_of(block: Any) -> str | None:
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        if isinstance(text, str):
            return text
    return None


def _same_json(text: str | None, value: Any) -> bool:
    if text is None or text.lstrip()[:1] not in ("{", "["):
        return False
    try:
        return bool(parse_json(text) == value)
    except JsonError:
        return False


def _wraps_text(structured: Any, texts: list[str]) -> bool:
    """Whether *structured* is the text blocks' output wrapped in an object of one key, as
    SDKs send a tool's plain return value (`{"result": text}` from MCPServer, `{"content":
    text}` from the reference filesystem server). Then the output is the text: stored as
    text (lines, grep) it equals what the tool returned."""
    if not isinstance(structured, dict) or len(structured) != 1 or not texts:
        return False
    (value,) = structured.values()
    text = _TEXT_JOINER.join(texts)
    return value == text if isinstance(value, str) else _same_json(text, value)


def _replace_blocks(blocks: list[Any], dropped: set[int], summaries: list[str]) -> list[Any]:
    """The blocks with the dropped text blocks gone and the summaries where the first of
    them was (first of all when the promoted output had no text block)."""
    summary_blocks = [{"type": "text", "text": summary} for summary in summaries]
    kept: list[Any] = []
    placed = False
    for index, block in enumerate(blocks):
        if index in dropped:
            if not placed:
                kept.extend(summary_blocks)
                placed = True
            continue
        kept.append(block)
    if not placed:
        kept[0:0] = summary_blocks
    return kept


def _resource_link(store: BlobStore, blob_id: BlobId, is_json: bool) -> dict[str, Any]:
    link: dict[str, Any] = {
        "type": "resource_link",
        "uri": blob_uri(blob_id),
        "name": f"blob {blob_id}",
        "description": "The whole tool output, stored; reading it gives an overview. "
        "inspect with a selector reads any part of it.",
        "mimeType": _MIME_OF_KIND[is_json],
    }
    with contextlib.suppress(OSError, BlobStoreError):  # a hint: left out when unknown
        link["size"] = store.size_sync(blob_id)
    return link
