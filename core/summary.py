"""The summary that enters the history in place of a stored output (docs/promotion.md#summaries).

Byte-exact: lines joined by "\\n", no trailing newline, never more than
``policy.summary_limit`` UTF-8 bytes. When the full summary would be longer, every shown
line (text lines, the schema line, element lines) is cut to one common width: the largest
that fits. Object summaries instead keep as many whole key lines as fit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from core.agent.policy import DEFAULT_POLICY, Policy
from core.content import Content, Structured, Text, cut_utf8, decode_text, encode_text
from core.json_stream import PromotedJson
from core.json_values import display_key, dumps_compact, json_type, shape
from core.lines import count_lines, head_lines, tail_lines
from core.store.blob_id import BlobId

ELLIPSIS = "…"
_ELLIPSIS_BYTES = ELLIPSIS.encode()
KEY_LINE_WIDTH = 80  # an object's key lines are cut to this before counting what fits


def summarize(blob_id: BlobId, content: Content, policy: Policy = DEFAULT_POLICY) -> str:
    """The history text for *content* stored under *blob_id*."""
    ref = f"[blob:{blob_id}]"
    if isinstance(content, Text):
        return _text_summary(ref, content.text, policy)
    if not isinstance(content, Structured):
        raise TypeError(f"content must be Text or Structured, got {type(content).__name__}")
    if isinstance(content, PromotedJson) and (summary := _promoted(ref, content, policy)):
        return summary
    value = content.value
    if isinstance(value, list):
        return _array_summary(ref, len(value), value[: max(policy.json_head_entries, 1)], policy)
    if isinstance(value, dict):
        return _object_summary(ref, len(value), lambda: key_lines(value), policy)
    compact = dumps_compact(value)
    line = _Shown.of(compact, policy.summary_limit)
    # line.size is only exact up to the limit; the header gives the value's real size.
    header = f"{ref} json_{json_type(value)} | {len(encode_text(compact))} bytes"
    return _fit([header, "── head ──", line], policy.summary_limit)


@dataclass(frozen=True, slots=True)
class _Shown:
    """A line that may be cut: enough of its UTF-8 prefix for any width, and its size.

    A huge line is never encoded whole: no width can exceed the summary limit, so the
    first ``limit`` characters (at least ``limit`` bytes) are all any cut can keep.
    """

    prefix: bytes
    size: int  # exact when it fits the limit, else some number above the limit

    @classmethod
    def of(cls, line: str, limit: int) -> _Shown:
        prefix = encode_text(line[: limit + 1])
        if len(line) <= limit + 1:
            return cls(prefix, len(prefix))
        return cls(prefix, max(len(prefix), limit + 1))

    def cut(self, width: int) -> bytes:
        if self.size <= width:
            return self.prefix
        return cut_utf8(self.prefix, max(width - len(_ELLIPSIS_BYTES), 0)) + _ELLIPSIS_BYTES

    def cut_size(self, width: int) -> int:
        """len(self.cut(width)), without making the bytes (_fit asks it many times)."""
        prefix = self.prefix
        if self.size <= width:
            return len(prefix)
        size = max(width - len(_ELLIPSIS_BYTES), 0)
        if size >= len(prefix):
            return len(prefix) + len(_ELLIPSIS_BYTES)
        while size > 0 and prefix[size] & 0xC0 == 0x80:  # as cut_utf8 backs off
            size -= 1
        return size + len(_ELLIPSIS_BYTES)


def cut_line(line: str, width: int) -> str:
    """*line* if it is at most *width* bytes, else its cut prefix followed by `…`."""
    return decode_text(_Shown.of(line, width).cut(width))


Part = str | _Shown  # a str is never cut (headers, markers); a _Shown is


def _fit(parts: list[Part], limit: int) -> str:
    fixed = sum(len(encode_text(p)) for p in parts if isinstance(p, str))
    shown = [p for p in parts if isinstance(p, _Shown)]
    newlines = len(parts) - 1

    def total(width: int) -> int:
        return fixed + newlines + sum([p.cut_size(width) for p in shown])

    widest = max((p.size for p in shown), default=0)
    width = widest
    if total(widest) > limit:
        width = _widest_fitting(total, [p.size for p in shown], limit - fixed - newlines, limit)
    return "\n".join(p if isinstance(p, str) else decode_text(p.cut(width)) for p in parts)


def _widest_fitting(total: Callable[[int], int], sizes: list[int], room: int, limit: int) -> int:
    """The largest width up to min(max(sizes), limit) at which total(width) <= limit (0
    when none is): what a binary search over the widths finds, in a step or two.

    A line cut to a width of at least the ellipsis's takes at most that width (less when
    the cut backs off to a character's start), so the largest width at which every line
    taking min(size, width) bytes fits in *room* is one where total fits too; from there
    the widths that still fit are the few that back-offs make room for."""
    high = min(max(sizes, default=0), limit)
    guess = _room_width(sorted(sizes), room)
    if len(_ELLIPSIS_BYTES) <= guess <= high and total(guess) <= limit:
        for _ in range(8):
            if guess == high or total(guess + 1) > limit:
                return guess
            guess += 1
        low = guess  # total(width) grows with width: search the rest
    else:
        low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if total(middle) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _room_width(sizes: list[int], room: int) -> int:
    """The largest width at which lines of *sizes* (ascending), each taking min(size,
    width) bytes, take at most *room* bytes (-1 when even width 0 is too much)."""
    whole = 0
    for cut_from, size in enumerate(sizes):
        width = (room - whole) // (len(sizes) - cut_from)  # the rest cut to one width
        if width < size:
            return width
        whole += size
    return sizes[-1] if sizes else -1  # every line whole


def _text_summary(ref: str, text: str, policy: Policy) -> str:
    count = count_lines(text)
    limit = policy.summary_limit
    head = head_lines(text, min(policy.head_lines, count))
    parts: list[Part] = [f"{ref} text | {count} lines", "── head ──"]
    parts += [_Shown.of(line, limit) for line in head]
    if count > policy.head_lines:
        tail = tail_lines(text, min(policy.tail_lines, count - policy.head_lines))
        if tail:
            parts.append("── tail ──")
            parts += [_Shown.of(line, limit) for line in tail]
    return _fit(parts, limit)


def _bounded_join(pieces: Iterable[str], separator: str, limit: int) -> str:
    """Join *pieces*, stopping once the result is longer than *limit* characters."""
    out: list[str] = []
    length = 0
    for piece in pieces:
        out.append(piece)
        length += len(piece) + len(separator)
        if length > limit + 1:
            break
    return separator.join(out)


def schema_line(first: Any, limit: int) -> str:
    """The schema of an array, from its first element (bounded for huge objects)."""
    if isinstance(first, dict):
        if not first:
            return "(empty)"
        # display_key quotes a key with a line break, which would split the schema line.
        keys = (f"{display_key(key)}: {json_type(value)}" for key, value in first.items())
        return _bounded_join(keys, ", ", limit)
    return json_type(first)


def _promoted(ref: str, content: PromotedJson, policy: Policy) -> str | None:
    """The summary from what streaming kept (core.json_stream); None when the policy asks
    for more entries or key lines than were kept (then the value is parsed)."""
    facts = content.facts
    if facts.kind == "array":
        if len(facts.head) < min(facts.count, max(policy.json_head_entries, 1)):
            return None
        return _array_summary(ref, facts.count, list(facts.head), policy)
    # Every key line takes at least 8 bytes with its newline, so limit // 8 + 1 lines are
    # more than any summary shows.
    if len(facts.key_shapes) < min(facts.count, policy.summary_limit // 8 + 2):
        return None
    lines = [f"{display_key(key)}: {value_shape}" for key, value_shape in facts.key_shapes]
    return _object_summary(ref, facts.count, lambda: iter(lines), policy)


def _array_summary(ref: str, count: int, head: list[Any], policy: Policy) -> str:
    """*head*: the array's first max(json_head_entries, 1) entries (all, when fewer)."""
    limit = policy.summary_limit
    items = head
    schema = schema_line(items[0], limit) if items else "(empty)"
    parts: list[Part] = [f"{ref} json_array | {count} entries", "── schema ──"]
    parts.append(_Shown.of(schema, limit))
    if items:
        parts.append("── head ──")
        head = items[: policy.json_head_entries]
        parts += [_Shown.of(dumps_compact(item), limit) for item in head]
    return _fit(parts, limit)


def key_lines(value: dict[str, Any]) -> Iterator[str]:
    for key, item in value.items():
        yield f"{display_key(key)}: {shape(item)}"


def _object_summary(
    ref: str, count: int, lines_of: Callable[[], Iterator[str]], policy: Policy
) -> str:
    """*lines_of* gives the object's key lines in order, afresh at each call."""
    limit = policy.summary_limit
    lines = [f"{ref} json_object | {count} keys", "── keys ──"]
    size = len(encode_text("\n".join(lines)))
    whole: list[str] = []
    for line in lines_of():
        size += 1 + len(encode_text(line[: limit + 1]))
        if size > limit:
            break
        whole.append(line)
    else:
        return "\n".join(lines + whole)

    # Too long: cut every key line to KEY_LINE_WIDTH, keep as many as fit with the trailer.
    size = len(encode_text("\n".join(lines)))
    kept: list[str] = []
    for line in lines_of():
        cut = cut_line(line, KEY_LINE_WIDTH)
        remaining = count - len(kept) - 1
        trailer = 0 if remaining == 0 else 1 + len(_more_keys(remaining).encode())
        if size + 1 + len(encode_text(cut)) + trailer > limit:
            break
        kept.append(cut)
        size += 1 + len(encode_text(cut))
    more = count - len(kept)
    if more:
        kept.append(_more_keys(more))
    return "\n".join(lines + kept)


def _more_keys(count: int) -> str:
    return f"{ELLIPSIS} +{count} more keys"
