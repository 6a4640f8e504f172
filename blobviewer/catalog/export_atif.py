"""`manage.py sessions export SESSION --format atif`: a session as an ATIF v1.7 trajectory
(the Agent Trajectory Interchange Format of Harbor, rfcs/0001-trajectory-format.md).

A user item is a `user` step (its role `system`: a `system` step; `compacted`: a system
step marked as a compaction that replaces the context before it). An assistant item is an
`agent` step with its tool calls and, as `observation.results`, the results of those calls
wherever the recording put them (paired by call id, as on the timeline); a result whose
call was not recorded is an agent step of its own. Promoted outputs are their summaries
(`[blob:<id>]` …), or with *store* given the blob's whole content, streamed from the store.

The document is written a step at a time (a step's inlined blob a block at a time), so a
long session or a big blob is never held whole. See docs/export.md.
"""

from __future__ import annotations

import codecs
import json
import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from blobviewer.catalog.export_walk import loaded_units, promoted_blob, session_units
from blobviewer.models import Item, Session
from core.store import BlobStore, BlobStoreError

SCHEMA_VERSION = "ATIF-v1.7"
# What a tool call keeps of its own in our items and ATIF has no field for: in `extra`.
_CALL_FIELDS = {"id", "name", "arguments"}
_COMPACTION = {"type": "compaction", "boundary": "replace"}

Write = Callable[[str], object]  # what it returns (a count of characters) is ignored


class ExportError(Exception):
    """An export that cannot be finished; the message says why, in one line."""


@dataclass
class _Totals:
    """The sums of the steps' metrics, for `final_metrics` (a total stays None while no
    step has that metric)."""

    steps: int = 0
    values: dict[str, float] = field(default_factory=dict)

    def add(self, metrics: dict[str, Any]) -> None:
        for name, value in metrics.items():
            self.values[name] = self.values.get(name, 0) + value


@dataclass(frozen=True, eq=False)
class _Inline:
    """Where a promoted output's blob goes whole into the document being written."""

    marker: str
    blob_id: uuid.UUID


@dataclass(frozen=True)
class _Inliner:
    """Puts promoted outputs' blobs in whole: *marker* stands for a blob while its step
    is encoded (random, so no recorded text holds it)."""

    store: BlobStore
    warn: Write
    marker: str = field(default_factory=lambda: f"\x00{uuid.uuid4().hex}:")

    def content(self, blob_id: uuid.UUID) -> _Inline | None:
        """The blob to put in whole; None (said through *warn*) when the store lacks it."""
        try:
            if self.store.exists_sync(blob_id):
                return _Inline(self.marker, blob_id)
        except BlobStoreError as error:
            self.warn(f"blob {blob_id}: {error}; its summary is written instead")
            return None
        self.warn(f"blob {blob_id} is not in the store; its summary is written instead")
        return None


def write_atif(
    session: Session,
    write: Write,
    *,
    store: BlobStore | None = None,
    warn: Write = lambda _: None,
) -> int:
    """Write *session* as an ATIF trajectory through *write* (text, in pieces); with
    *store*, promoted outputs whole from it (a blob the store lacks keeps its summary,
    said through *warn*). Returns the number of steps. Raises ExportError."""
    inliner = _Inliner(store, warn) if store is not None else None
    head = {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(session.id),
        "agent": _agent(session),
        "extra": _session_extra(session),
    }
    write(_dumps(head)[:-1] + ',"steps":[\n')
    totals = _Totals()
    for step in _steps(session, inliner):
        totals.steps += 1
        step = {"step_id": totals.steps, **step}
        if "metrics" in step:
            totals.add(step["metrics"])
        if totals.steps > 1:
            write(",\n")
        _write_step(step, write, store=store)
    if totals.steps == 0:  # ATIF needs a step: say that there was nothing
        write(
            _dumps({"step_id": 1, "source": "system", "message": "", "extra": {"no_items": True}})
        )
        totals.steps = 1
    write('\n],"final_metrics":' + _dumps(_final_metrics(session, totals)) + "}\n")
    return totals.steps


def _agent(session: Session) -> dict[str, Any]:
    """ATIF's agent: its name from the session's meta (`agent`, else its recording's
    format), its version from the meta (`agent_version`), and the session's model."""
    meta = session.meta if isinstance(session.meta, dict) else {}
    name = meta.get("agent") if isinstance(meta.get("agent"), str) else ""
    version = meta.get("agent_version") if isinstance(meta.get("agent_version"), str) else ""
    agent = {"name": name or session.source_format or "unknown", "version": version or "unknown"}
    if session.model:
        agent["model_name"] = session.model
    return agent


def _session_extra(session: Session) -> dict[str, Any]:
    """What the session holds that ATIF has no root field for (title, times, outcome…)."""
    extra: dict[str, Any] = {
        "title": session.title,
        "source_format": session.source_format,
        "created_at": session.created_at.isoformat(),
    }
    for name in ("status", "job", "task", "outcome"):
        if value := getattr(session, name):
            extra[name] = value
    if session.reward is not None and math.isfinite(session.reward):
        extra["reward"] = session.reward
    if session.meta:
        extra["meta"] = session.meta
    return extra


def _final_metrics(session: Session, totals: _Totals) -> dict[str, Any]:
    names = {
        "prompt_tokens": "total_prompt_tokens",
        "completion_tokens": "total_completion_tokens",
        "cached_tokens": "total_cached_tokens",
        "cost_usd": "total_cost_usd",
    }
    final: dict[str, Any] = {names[name]: value for name, value in totals.values.items()}
    if "total_cost_usd" not in final and _finite(session.cost_usd):
        final["total_cost_usd"] = session.cost_usd
    final["total_steps"] = totals.steps
    return final


def _steps(session: Session, inliner: _Inliner | None) -> Iterator[dict[str, Any]]:
    """The steps of *session* in order, without their step ids."""
    for loaded in loaded_units(session, session_units(session)):
        unit = loaded.unit
        if unit.kind == "message":
            item = loaded.items.get(unit.items[0].seq)
            if item is not None:
                yield _message_step(item)
            continue
        results: dict[int, list[dict[str, Any]]] = {}  # assistant seq -> its calls' results
        for step in unit.steps:
            result = loaded.item_of(step, result=True)
            if result is None:
                continue
            if step.assistant is None:
                yield _orphan_step(result, inliner)
            elif step.call is not None and step.call.id:
                entry = _result(result, step.call.id, step.call.name, inliner)
                results.setdefault(step.assistant.seq, []).append(entry)
        for row in unit.items:
            item = loaded.items.get(row.seq)
            if item is not None:
                yield _agent_step(item, results.get(row.seq, []))


def _message_step(item: Item) -> dict[str, Any]:
    """A user item: a user step, or a system one (the system prompt, a compaction)."""
    step: dict[str, Any] = _timestamp(item)
    extra = _item_extra(item)
    if item.role == "compacted":
        # As the specification has it: the summary that replaces the context is the
        # step's observation (the message may be empty).
        step.update(source="system", message="")
        step["observation"] = {"results": [{"content": item.text}]}
        extra["context_management"] = dict(_COMPACTION)
    else:
        step.update(source="system" if item.role == "system" else "user", message=item.text)
        if item.role and item.role != "system":
            extra["role"] = item.role
    if extra:
        step["extra"] = extra
    return step


def _agent_step(item: Item, results: list[dict[str, Any]]) -> dict[str, Any]:
    """An assistant item: its text, its calls, and the results of those calls."""
    step: dict[str, Any] = {**_timestamp(item), "source": "agent", "message": item.text}
    extra = _item_extra(item)
    if item.role:
        extra["role"] = item.role
    recorded = item.tool_calls if isinstance(item.tool_calls, list) else []
    calls = [
        _tool_call(call, item.seq, n) for n, call in enumerate(recorded) if isinstance(call, dict)
    ]
    if len(calls) < len(recorded):
        extra["calls_not_objects"] = len(recorded) - len(calls)
    if calls:
        step["tool_calls"] = calls
    if results:
        step["observation"] = {"results": results}
    if metrics := _metrics(item):
        step["metrics"] = metrics
    if extra:
        step["extra"] = extra
    return step


def _result(result: Item, call_id: str, tool: str, inliner: _Inliner | None) -> dict[str, Any]:
    """A call's result as an observation result (its tool in `extra` if it names another)."""
    content, extra = _output(result, inliner)
    if result.tool and result.tool != tool:
        extra["tool"] = result.tool
    entry: dict[str, Any] = {"source_call_id": call_id, "content": content}
    return {**entry, "extra": extra} if extra else entry


def _orphan_step(result: Item, inliner: _Inliner | None) -> dict[str, Any]:
    """A result whose call the recording lacks: an agent step without tool calls whose
    observation names the call id and tool in its `extra`."""
    content, extra = _output(result, inliner)
    extra.update(call_id=result.call_id, tool=result.tool, call_not_recorded=True)
    return {
        **_timestamp(result),
        "source": "agent",
        "message": "",
        "observation": {"results": [{"content": content, "extra": extra}]},
    }


def _tool_call(call: dict[str, Any], seq: int, index: int) -> dict[str, Any]:
    """One recorded call as ATIF's ToolCall. Arguments that are not an object (text that
    is not JSON, a list), which ATIF's `arguments` cannot hold, are `{}` with the value in
    `extra.raw_arguments`, as Harbor's own producers keep them (and our importer reads)."""
    call_id = call.get("id")
    name = call.get("name")
    arguments = call.get("arguments", {})
    extra = {key: value for key, value in call.items() if key not in _CALL_FIELDS}
    if not isinstance(arguments, dict):
        extra["raw_arguments"] = arguments
        arguments = {}
    if not isinstance(call_id, str) or not call_id:
        call_id = f"call-{seq}-{index}"  # ATIF needs one; no result can name it
        extra["id_not_recorded"] = True
    shown = {
        "tool_call_id": call_id,
        "function_name": name if isinstance(name, str) else "",
        "arguments": arguments,
    }
    return {**shown, "extra": extra} if extra else shown


def _output(result: Item, inliner: _Inliner | None) -> tuple[Any, dict[str, Any]]:
    """A result's content (its output, or an _Inline for its blob) and its `extra`."""
    extra: dict[str, Any] = {}
    if result.is_error:
        extra["is_error"] = True
    if result.title:
        extra["title"] = result.title
    extra.update(_item_extra(result))
    blob_id = promoted_blob(result)
    if blob_id is None:
        return result.output, extra
    extra.update(blob_id=str(blob_id), received_bytes=result.received_bytes)
    inline = inliner.content(blob_id) if inliner is not None else None
    if inline is None:
        if inliner is not None:
            extra["not_inlined"] = True  # the store lacks the blob (the warning says so)
        return result.output, extra
    extra["inlined"] = True
    return inline, extra


def _metrics(item: Item) -> dict[str, Any]:
    """The item's tokens and cost as ATIF metrics, leaving out what was not recorded."""
    metrics: dict[str, Any] = {}
    for name, value in (
        ("prompt_tokens", item.input_tokens),
        ("completion_tokens", item.output_tokens),
        ("cached_tokens", item.cache_read_tokens),
    ):
        if value is not None:
            metrics[name] = value
    if _finite(item.cost_usd):
        metrics["cost_usd"] = item.cost_usd
    return metrics


def _item_extra(item: Item) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if item.note:
        extra["note"] = item.note
    if item.sidechain:
        extra["sidechain"] = True
    if item.redactions:
        extra["redactions"] = item.redactions
    return extra


def _timestamp(item: Item) -> dict[str, Any]:
    return {"timestamp": item.at.isoformat()} if item.at is not None else {}


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _write_step(step: dict[str, Any], write: Write, *, store: BlobStore | None) -> None:
    """Write one step; each _Inline in it becomes its blob's content, streamed."""
    inlined: list[_Inline] = []
    text = _dumps(step, default=lambda found: _placeholder(found, inlined))
    for inline in inlined:
        before, _, text = text.partition(_dumps(inline.marker + str(inline.blob_id)))
        write(before)
        assert store is not None
        _write_blob(store, inline.blob_id, write)
    write(text)


def _placeholder(found: Any, inlined: list[_Inline]) -> str:
    if not isinstance(found, _Inline):
        raise TypeError(f"cannot write {type(found).__name__} as JSON")
    if not any(seen is found for seen in inlined):  # _dumps may encode a step twice
        inlined.append(found)
    return found.marker + str(found.blob_id)


def _write_blob(store: BlobStore, blob_id: uuid.UUID, write: Write) -> None:
    """The blob's content as a JSON string, a block at a time (a JSON blob: its compact
    text, as the store keeps it)."""
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    write('"')
    try:
        with store.open_sync(blob_id) as blob:
            for block in blob.blocks():
                write(_dumps(decoder.decode(block))[1:-1])
        write(_dumps(decoder.decode(b"", final=True))[1:-1])
    except (BlobStoreError, OSError, UnicodeDecodeError) as error:
        raise ExportError(f"blob {blob_id}: cannot read it from the store ({error})") from None
    write('"')


def _dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """Compact JSON text, non-ASCII kept; a text with a lone surrogate (which UTF-8
    cannot carry) gets ASCII escapes instead, which read back the same."""
    try:
        text = json.dumps(
            value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=default
        )
    except ValueError as error:
        raise ExportError(f"cannot write as JSON: {error}") from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, allow_nan=False, separators=(",", ":"), default=default)
    return text
