"""Whether a tool output is text in a wrapper: the one rule that the Worker, the MCP
proxy and every importer apply before an output is promoted (docs/promotion.md#text-in-a-wrapper).

Tools and recorders often wrap a text in JSON: MCP's `content` blocks, Claude Code's
`tool_result` content, OpenAI's content parts, Codex's `"[{\"text\": …, \"type\":
\"text\"}]"` (such a list encoded as a JSON string), or an object of one key holding the
text (`{"content": text}`, as the reference filesystem server answers). Stored as JSON,
such an output reads as `json_array | 1 entry`, and `lines:` and `grep:` refuse it. The
text inside is the output: the blocks' texts joined with a newline. Blocks of other kinds
(an image, audio) are not text; they are left out and named (`1 image not stored`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from core.json_values import JsonError, parse_json

JOINER = "\n"
# The `type` of a block that holds text: MCP's and Anthropic's `text`, OpenAI's parts.
TEXT_BLOCKS = frozenset({"text", "input_text", "output_text"})
# The one key of an object that only wraps a text (or a list of blocks).
WRAPPER_KEYS = frozenset({"content", "result", "output", "text"})
# How a JSON text that may be a wrapper begins: a list whose first object opens with
# `type` or `text`, or an object of one wrapper key. Anything else is never parsed here.
_MAY_WRAP = re.compile(
    r'\s*(?:\[\s*\{\s*"(?:type|text)"|\{\s*"(?:' + "|".join(sorted(WRAPPER_KEYS)) + r')"\s*:)'
)


@dataclass(frozen=True, slots=True)
class WrappedText:
    """The text a wrapped output holds, and the kinds of the blocks left out (in order)."""

    text: str
    left_out: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        """`1 image not stored`, `2 images and 1 audio not stored`; "" when none."""
        counts = Counter(self.left_out)
        if not counts:
            return ""
        parts = [f"{n} {kind}{'' if n == 1 else 's'}" for kind, n in counts.items()]
        named = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return f"{named} not stored"


def unwrap_text(output: Any) -> WrappedText | None:
    """The text *output* holds when it is text in a wrapper (see the module): a list of
    content blocks with at least one text block, such a list or a one-key wrapper encoded
    as a JSON string, or a one-key wrapper object; None for anything else (plain text,
    other JSON), which stays as it is."""
    if isinstance(output, str):
        if not _MAY_WRAP.match(output):
            return None
        try:
            output = parse_json(output)
        except JsonError:
            return None
    if isinstance(output, list):
        return _blocks_text(output)
    if isinstance(output, dict) and len(output) == 1:
        ((key, value),) = output.items()
        if key in WRAPPER_KEYS:
            if isinstance(value, str):
                return WrappedText(value)
            if isinstance(value, list):
                return _blocks_text(value)
    return None


def _blocks_text(blocks: list[Any]) -> WrappedText | None:
    """The joined texts of *blocks* when every entry is a content block (an object with a
    string `type`) and one at least holds text; else None."""
    texts: list[str] = []
    left_out: list[str] = []
    for block in blocks:
        if not isinstance(block, dict) or not isinstance(kind := block.get("type"), str):
            return None
        if kind in TEXT_BLOCKS:
            if not isinstance(text := block.get("text"), str):
                return None
            texts.append(text)
        else:
            left_out.append(kind.removesuffix("_url").removeprefix("input_"))
    return WrappedText(JOINER.join(texts), tuple(left_out)) if texts else None
