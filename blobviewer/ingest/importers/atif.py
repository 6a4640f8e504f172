"""ATIF, the Agent Trajectory Interchange Format (v1.0 to v1.8): one JSON document with
`schema_version` `ATIF-v1.x`, an `agent` and numbered `steps` (docs/evaluations.md).
Harbor writes one per trial (`agent/trajectory.json`) from about thirty agents' logs.

A step becomes items in order:

- `source: "user"`: a user item; `source: "system"`: a user item of the role `system`, or
  of the role `compacted` where `extra.context_management` says the context was compacted
  (another kind, e.g. pruning, is the role `context <kind>`), its observation's content
  in its text;
- `source: "agent"`: an assistant item (`reasoning_content` first, as `(reasoning) …`),
  its `tool_calls` as calls, and `observation.results` as tool results paired by
  `source_call_id`. A result without one answers the step's first call still unanswered,
  else a call of its own named `observation` (Terminus-2 answers with its terminal's
  output, not tool calls). `metrics` are the turn's tokens (`prompt_tokens`, cached ones
  included, is the context read) and its `cost_usd`;
- a step with `is_copied_context` (copied from an earlier trajectory, e.g. the prompt a
  continuation starts from again) is one user item of the role `copied context`: shown,
  its calls and tokens not counted a second time.

`continued_trajectory_ref` names the file the run goes on in (beside this one): its steps
are joined to this session, each part's steps after the last. A sub-agent's trajectory,
embedded in `subagent_trajectories` or named by a result's `subagent_trajectory_ref`
(`trajectory_path`, beside this file), is a session of its own naming this one as its
parent (the parent's page lists it). A file that another trajectory beside it names as
its continuation or sub-agent is part of that one: read with it, not on its own
(:func:`part_of`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.recording import (
    IMPORT_NAMESPACE,
    RecordBuilder,
    Recording,
    RecordingError,
    dict_field,
    finite_number,
    first_line,
    header,
    iso_time,
    list_field,
    stable_session_id,
    step_output_text,
    str_or_empty,
    text_of,
    token_count,
)

FORMAT = "atif"
# Bump when what this importer derives from a trajectory changes (see claude_code).
IMPORTER_VERSION = 1
# Sub-agents are sessions naming their parent (blobviewer.templatetags.subagent_tags).
SUBAGENTS = True

# Continuation files joined, and sub-agents nested, at most: a loop of references, or a
# hostile file, ends there.
MAX_PARTS = 100
MAX_DEPTH = 8
# Sessions one recording makes at most (itself and its sub-agents): files that name each
# other, or themselves, are read once each, and a fan of them ends here.
MAX_SESSIONS = 200


class PartOfRecording(RecordingError):
    """The file is a continuation or sub-agent of another trajectory beside it, and is
    read with that one (:func:`part_of`)."""


def looks_like(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and str_or_empty(document.get("schema_version")).startswith("ATIF-v1")
        and isinstance(document.get("steps"), list)
    )


def load(path: Path, document: Any) -> list[Recording]:
    """The session of the trajectory in *path* (its continuations joined), then one for
    each of its sub-agents. Raises PartOfRecording for a file another trajectory beside
    it reads, RecordingError for one that is not a trajectory."""
    root = part_of(path)
    if root is not None:
        raise PartOfRecording(path, None, f"part of {root.name}, read with it")
    return load_trajectory(path, document)


def load_trajectory(
    path: Path, document: Any, *, session_id: str | None = None, meta: dict[str, Any] | None = None
) -> list[Recording]:
    """load, without asking whether *path* is part of another trajectory (a Harbor
    trial's `agent/trajectory.json` is the trial's); *session_id* and *meta* as the
    caller knows them better (the trial's id and facts)."""
    if not looks_like(document):
        raise RecordingError(path, None, "not an ATIF trajectory (no schema_version ATIF-v1.x)")
    tree = _Tree({path.name})
    reader = _Session(path, document, depth=0, tree=tree)
    reader.read()
    own_id = session_id or reader.session_id()
    recordings = [reader.recording(own_id, meta or {})]
    recordings.extend(reader.subagents(own_id))
    if tree.left_out:
        recordings[0].header["meta"]["subagents_left_out"] = tree.left_out
    return recordings


class _Tree:
    """What one recording's reads share: the files read (the trajectory, its parts and
    its sub-agents' files, each once) and how many sessions it has made."""

    def __init__(self, files: set[str]) -> None:
        self.files = files
        self.sessions = 1
        self.left_out = 0


def opening(document: dict[str, Any]) -> list[Any]:
    """What a trajectory's session id is made from: its own ids, its agent and its first
    steps (ATIF's `session_id` is run-wide and need not be unique, so it is not enough)."""
    return [
        document.get("session_id"),
        document.get("trajectory_id"),
        dict_field(document, "agent").get("name"),
        list_field(document, "steps")[:3],
    ]


def part_of(path: Path) -> Path | None:
    """The trajectory that names *path* as its continuation or a sub-agent's file, when
    it is beside it: for `trajectory.cont-1.json`, `trajectory.json` (Harbor names parts
    after the file they belong to). None when there is none."""
    stem, dot, _ = path.name.partition(".")
    if not dot or path.name == f"{stem}.json":
        return None
    root = path.with_name(f"{stem}.json")
    try:
        document = json.loads(root.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not looks_like(document):
        return None
    return root if path.name in _named_parts(root, document) else None


def _named_parts(root: Path, document: dict[str, Any]) -> set[str]:
    """The names of the files *document* (and its continuations) refers to beside it."""
    names: set[str] = set()
    for _ in range(MAX_PARTS):
        for ref in _subagent_refs(document):
            names.add(Path(str_or_empty(ref.get("trajectory_path"))).name)
        following = str_or_empty(document.get("continued_trajectory_ref"))
        if Path(following).name in ("", ".", "..") or Path(following).name in names:
            break
        names.add(Path(following).name)
        try:
            document = json.loads(root.with_name(Path(following).name).read_bytes())
        except (OSError, ValueError, RecursionError):
            break
        if not looks_like(document):
            break
    return names - {""}


def _subagent_refs(document: dict[str, Any]) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = []
    for step in list_field(document, "steps"):
        if not isinstance(step, dict):
            continue
        for result in list_field(dict_field(step, "observation"), "results"):
            if isinstance(result, dict):
                refs.extend(
                    r for r in list_field(result, "subagent_trajectory_ref") if isinstance(r, dict)
                )
    return refs


class _Session:
    """One session: a trajectory and its continuations, read step by step."""

    def __init__(self, path: Path, document: dict[str, Any], *, depth: int, tree: _Tree) -> None:
        self.path = path
        self.tree = tree
        self.document = document
        self.depth = depth
        self.builder = RecordBuilder()
        self.agent = dict_field(document, "agent")
        self.parts: list[dict[str, Any]] = [document]
        # Sub-agents met: (key, trajectory, where its file is), in order, each once.
        self.found: dict[str, tuple[dict[str, Any], Path]] = {}
        self.missing: list[str] = []

    def read(self) -> None:
        document, where = self.document, self.path
        read = {where.name}
        for _ in range(MAX_PARTS):
            self._embedded(document, where)
            for index, step in enumerate(list_field(document, "steps")):
                if not isinstance(step, dict):
                    raise RecordingError(where, None, f"steps[{index}] is not a step object")
                self._step(step, where)
            following = str_or_empty(document.get("continued_trajectory_ref"))
            if not following:
                return
            name = Path(following).name
            if name in read or name in self.tree.files:  # a loop of references
                return
            if name in ("", ".", ".."):
                self.builder.user(f"(continued in {following}: not a file name)", role="missing")
                return
            next_path = where.with_name(name)
            read.add(name)
            self.tree.files.add(name)
            try:
                document = json.loads(next_path.read_bytes())
            except (OSError, ValueError, RecursionError):
                self.builder.user(
                    f"(continued in {following}, which is not beside it)", role="missing"
                )
                return
            if not looks_like(document):
                self.builder.user(
                    f"(continued in {following}, which is not a trajectory)", role="missing"
                )
                return
            where = next_path
            self.parts.append(document)

    # --- steps -------------------------------------------------------------------------

    def _step(self, step: dict[str, Any], where: Path) -> None:
        self.builder.from_source(step)
        at = iso_time(step.get("timestamp"))
        source = step.get("source")
        results = [
            r for r in list_field(dict_field(step, "observation"), "results") if isinstance(r, dict)
        ]
        self._note_subagents(results, where)
        if step.get("is_copied_context") is True:
            self.builder.user(_copied_text(step, results), at=at, role="copied context")
        elif source == "agent":
            self._agent_step(step, results, at)
        elif source == "system":
            self._system_step(step, results, at)
        else:
            text = _joined(text_of(step.get("message")), *(_result_output(r) for r in results))
            self.builder.user(text, at=at)

    def _agent_step(
        self, step: dict[str, Any], results: list[dict[str, Any]], at: str | None
    ) -> None:
        text = text_of(step.get("message"))
        reasoning = str_or_empty(step.get("reasoning_content"))
        if reasoning.strip():
            text = f"(reasoning) {reasoning}" + (f"\n{text}" if text else "")
        calls = [
            _call(call, step, index) for index, call in enumerate(list_field(step, "tool_calls"))
        ]
        step_id = step.get("step_id")
        answered: set[str] = set()
        paired: list[tuple[str, dict[str, Any]]] = []
        for index, result in enumerate(results):
            call_id = str_or_empty(result.get("source_call_id"))
            if not call_id:
                call_id = next((c["id"] for c in calls if c["id"] not in answered), "")
            if not call_id:
                call_id = f"step-{step_id}-observation-{index + 1}"
                calls.append({"id": call_id, "name": "observation", "arguments": {}})
            answered.add(call_id)
            paired.append((call_id, result))
        self.builder.assistant(text, calls, at=at, **_metrics(step))
        for call_id, result in paired:
            extra = dict_field(result, "extra")
            self.builder.tool_result(
                call_id,
                _result_output(result),
                is_error=extra.get("is_error") is True,
                at=at,
                title=str_or_empty(extra.get("title")) or None,
                note=str_or_empty(extra.get("note")) or None,
            )

    def _system_step(
        self, step: dict[str, Any], results: list[dict[str, Any]], at: str | None
    ) -> None:
        managed = dict_field(dict_field(step, "extra"), "context_management")
        kind = str_or_empty(managed.get("type"))
        text = _joined(text_of(step.get("message")), *(_result_output(r) for r in results))
        if kind == "compaction":
            self.builder.user(f"(context compacted)\n\n{text}", at=at, role="compacted")
        else:
            self.builder.user(text, at=at, role=f"context {kind}"[:50] if kind else "system")

    # --- sub-agents --------------------------------------------------------------------

    def _embedded(self, document: dict[str, Any], where: Path) -> None:
        for index, trajectory in enumerate(list_field(document, "subagent_trajectories")):
            if isinstance(trajectory, dict) and looks_like(trajectory):
                key = str_or_empty(trajectory.get("trajectory_id")) or f"embedded-{index + 1}"
                self.found.setdefault(f"id:{key}", (trajectory, where))

    def _note_subagents(self, results: list[dict[str, Any]], where: Path) -> None:
        """Remember the sub-agents *results* refer to by file (embedded ones are found with
        their trajectory); a file that is not beside *where* is noted as missing."""
        for result in results:
            for ref in list_field(result, "subagent_trajectory_ref"):
                if not isinstance(ref, dict) or ref.get("trajectory_id"):
                    continue
                name = Path(str_or_empty(ref.get("trajectory_path"))).name
                if name in ("", ".", "..") or name in self.tree.files:
                    continue  # read already: this trajectory, a part of it, or a sub-agent
                self.tree.files.add(name)
                try:
                    document = json.loads(where.with_name(name).read_bytes())
                except (OSError, ValueError, RecursionError):
                    self.missing.append(name)
                    continue
                if looks_like(document):
                    self.found[f"path:{name}"] = (document, where.with_name(name))

    def subagents(self, parent_id: str) -> list[Recording]:
        """A recording for each sub-agent found (and theirs, to MAX_DEPTH levels)."""
        if self.depth >= MAX_DEPTH:
            return []
        recordings: list[Recording] = []
        for key, (document, where) in self.found.items():
            if self.tree.sessions >= MAX_SESSIONS:
                self.tree.left_out += 1
                continue
            self.tree.sessions += 1
            reader = _Session(where, document, depth=self.depth + 1, tree=self.tree)
            reader.read()
            own_id = str(uuid.uuid5(IMPORT_NAMESPACE, f"atif-subagent:{parent_id}:{key}"))
            name = str_or_empty(reader.agent.get("name")) or key.partition(":")[2]
            meta = {"parent_session_id": parent_id, "agent": name}
            recording = reader.recording(own_id, meta)
            recording.label = f"sub-agent {name}"
            recordings.append(recording)
            recordings.extend(reader.subagents(own_id))
        return recordings

    # --- the session -------------------------------------------------------------------

    def session_id(self) -> str:
        """A UUID from the trajectory's opening (see :func:`opening`)."""
        return stable_session_id(FORMAT, opening(self.document))

    def recording(self, session_id: str, meta: dict[str, Any]) -> Recording:
        records = self.builder.records
        first_user = next(
            (r["text"] for r in records if r["type"] == "user" and "role" not in r), ""
        )
        model = str_or_empty(self.agent.get("model_name")) or next(
            (
                str_or_empty(step.get("model_name"))
                for step in _steps(self.parts)
                if step.get("model_name")
            ),
            "",
        )
        facts: dict[str, Any] = {
            "agent": str_or_empty(self.agent.get("name")),
            "agent_version": str_or_empty(self.agent.get("version")),
            "schema_version": str_or_empty(self.document.get("schema_version")),
            **meta,
        }
        if len(self.parts) > 1:
            facts["parts"] = len(self.parts)
        if self.missing:
            facts["missing_subagents"] = self.missing[:20]
        totals = _final_metrics(self.parts)
        if totals:
            facts["final_metrics"] = totals
        session = header(
            session_id,
            title=str_or_empty(dict_field(self.document, "extra").get("title"))[:500]
            or first_line(first_user)
            or self.path.stem,
            model=model,
            created_at=next((r["at"] for r in records if r.get("at")), None),
            path=self.path,
            format=FORMAT,
            meta=facts,
        )
        cost = totals.get("total_cost_usd")
        if not any("cost_usd" in r for r in records) and isinstance(cost, float):
            session["cost_usd"] = cost  # no step gives its own: the trajectory's total
        return Recording(FORMAT, session, records)


def _steps(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for part in parts for s in list_field(part, "steps") if isinstance(s, dict)]


def _call(call: Any, step: dict[str, Any], index: int) -> dict[str, Any]:
    """A tool call as our items hold one. Arguments that were not an object (ATIF asks
    for one) are kept by their producer in `extra.raw_arguments`: those are the call's."""
    if not isinstance(call, dict):
        return {"id": f"step-{step.get('step_id')}-call-{index + 1}", "name": "", "arguments": {}}
    arguments = call.get("arguments")
    raw = dict_field(call, "extra").get("raw_arguments")
    if arguments in (None, {}) and raw is not None and not isinstance(raw, dict):
        arguments = raw
    return {
        "id": str_or_empty(call.get("tool_call_id"))
        or f"step-{step.get('step_id')}-call-{index + 1}",
        "name": str_or_empty(call.get("function_name")),
        "arguments": {} if arguments is None else arguments,
    }


def _metrics(step: dict[str, Any]) -> dict[str, Any]:
    """The turn's tokens and cost as item fields; {} when it has none."""
    metrics = dict_field(step, "metrics")
    prompt = token_count(metrics.get("prompt_tokens"))
    fields: dict[str, Any] = {}
    if prompt is not None:  # the whole prompt, cached tokens included
        fields["input_tokens"] = fields["context_tokens"] = prompt
    for field, key in (
        ("output_tokens", "completion_tokens"),
        ("cache_read_tokens", "cached_tokens"),
    ):
        count = token_count(metrics.get(key))
        if count is not None:
            fields[field] = count
    written = token_count(dict_field(metrics, "extra").get("cache_creation_input_tokens"))
    if written is not None:
        fields["cache_write_tokens"] = written
    cost = _dollars(metrics.get("cost_usd"))
    if cost is not None:
        fields["cost_usd"] = cost
    return fields


def _dollars(value: Any) -> float | None:
    number = finite_number(value)
    return number if number is not None and number >= 0 else None


def _final_metrics(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The trajectory's `final_metrics`: the last part's (a continuation's totals cover
    the run so far), numbers only."""
    for part in reversed(parts):
        metrics = dict_field(part, "final_metrics")
        totals: dict[str, Any] = {}
        for key, value in metrics.items():
            number = finite_number(value) if key.startswith("total_") else None
            if number is None:
                continue
            count = token_count(value)  # counts stay integers, as the trajectory has them
            is_count = count is not None and count < 2**63 and key != "total_cost_usd"
            totals[key] = count if is_count else number
        if totals:
            return totals
    return {}


def _result_output(result: dict[str, Any]) -> str:
    """A result's content as a step's output; a delegation without content names the
    sub-agents it went to (their sessions are listed on the page)."""
    if result.get("content") is not None:
        output, _ = step_output_text(result["content"])
        return output
    return _delegation_text(result)


def _delegation_text(result: dict[str, Any]) -> str:
    lines = []
    for ref in list_field(result, "subagent_trajectory_ref"):
        if isinstance(ref, dict):
            name = str_or_empty(ref.get("trajectory_path")) or str_or_empty(
                ref.get("trajectory_id")
            )
            summary = str_or_empty(dict_field(ref, "extra").get("summary"))
            lines.append(f"(sub-agent {name})" + (f": {summary}" if summary else ""))
    return "\n".join(lines)


def _copied_text(step: dict[str, Any], results: list[dict[str, Any]]) -> str:
    """A copied step as one text: who said it, what it called, what came back."""
    lines = [f"({step.get('source') or 'step'}) {text_of(step.get('message'))}".rstrip()]
    for call in list_field(step, "tool_calls"):
        if isinstance(call, dict):
            arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
            lines.append(f"→ {str_or_empty(call.get('function_name'))} {arguments}")
    lines.extend(_result_output(result) for result in results)
    return _joined(*lines)


def _joined(*texts: str) -> str:
    return "\n\n".join(text for text in texts if text)
