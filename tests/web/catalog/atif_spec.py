"""A test-only check of an ATIF v1.7 document against the specification's tables
(rfcs/0001-trajectory-format.md of harbor-framework/harbor): required fields, types, no
field the specification does not name, step ids from 1, agent-only fields on agent steps
only, and every observation result's `source_call_id` naming a call of its own step."""

from __future__ import annotations

from datetime import datetime
from typing import Any

_ROOT = {
    "schema_version": (str, True),
    "session_id": (str, False),
    "trajectory_id": (str, False),
    "agent": (dict, True),
    "steps": (list, True),
    "notes": (str, False),
    "final_metrics": (dict, False),
    "continued_trajectory_ref": (str, False),
    "extra": (dict, False),
    "subagent_trajectories": (list, False),
}
_AGENT = {
    "name": (str, True),
    "version": (str, True),
    "model_name": (str, False),
    "tool_definitions": (list, False),
    "extra": (dict, False),
}
_STEP = {
    "step_id": (int, True),
    "timestamp": (str, False),
    "source": (str, True),
    "model_name": (str, False),
    "reasoning_effort": ((str, float), False),
    "message": ((str, list), True),
    "reasoning_content": (str, False),
    "tool_calls": (list, False),
    "observation": (dict, False),
    "metrics": (dict, False),
    "extra": (dict, False),
    "llm_call_count": (int, False),
    "is_copied_context": (bool, False),
}
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
_TOOL_CALL = {
    "tool_call_id": (str, True),
    "function_name": (str, True),
    "arguments": (dict, True),
    "extra": (dict, False),
}
_RESULT = {
    "source_call_id": (str, False),
    "content": ((str, list), False),
    "subagent_trajectory_ref": (list, False),
    "extra": (dict, False),
}
_METRICS = {
    "prompt_tokens": (int, False),
    "completion_tokens": (int, False),
    "cached_tokens": (int, False),
    "cost_usd": ((int, float), False),
    "prompt_token_ids": (list, False),
    "completion_token_ids": (list, False),
    "logprobs": (list, False),
    "extra": (dict, False),
}
_FINAL = {
    "total_prompt_tokens": (int, False),
    "total_completion_tokens": (int, False),
    "total_cached_tokens": (int, False),
    "total_cost_usd": ((int, float), False),
    "total_steps": (int, False),
    "extra": (dict, False),
}


def atif_problems(document: Any, *, version: str = "ATIF-v1.7") -> list[str]:
    """What is wrong with *document* as ATIF *version*; [] when nothing is."""
    problems = _fields(document, _ROOT, "trajectory")
    if problems:
        return problems
    if document["schema_version"] != version:
        problems.append(f"schema_version: {document['schema_version']!r}, not {version!r}")
    problems += _fields(document["agent"], _AGENT, "agent")
    if "final_metrics" in document:
        problems += _fields(document["final_metrics"], _FINAL, "final_metrics")
    if not document["steps"]:
        problems.append("steps: empty")
    for index, step in enumerate(document["steps"]):
        problems += _step_problems(step, index)
    return problems


def _step_problems(step: Any, index: int) -> list[str]:
    where = f"steps[{index}]"
    problems = _fields(step, _STEP, where)
    if problems:
        return problems
    if step["step_id"] != index + 1:
        problems.append(f"{where}.step_id: {step['step_id']}, expected {index + 1}")
    if step["source"] not in ("system", "user", "agent"):
        problems.append(f"{where}.source: {step['source']!r}")
    if step["source"] != "agent":
        problems += [
            f"{where}.{name}: on a {step['source']} step" for name in _AGENT_ONLY if name in step
        ]
    if "timestamp" in step:
        try:
            datetime.fromisoformat(step["timestamp"].replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{where}.timestamp: not ISO 8601: {step['timestamp']!r}")
    call_ids = set()
    for n, call in enumerate(step.get("tool_calls", [])):
        problems += _fields(call, _TOOL_CALL, f"{where}.tool_calls[{n}]")
        if isinstance(call, dict):
            call_ids.add(call.get("tool_call_id"))
    if "metrics" in step:
        problems += _fields(step["metrics"], _METRICS, f"{where}.metrics")
    if "observation" in step:
        observation = step["observation"]
        problems += _fields(observation, {"results": (list, True)}, f"{where}.observation")
        for n, result in enumerate(
            observation.get("results", []) if isinstance(observation, dict) else []
        ):
            problems += _fields(result, _RESULT, f"{where}.observation.results[{n}]")
            source = result.get("source_call_id") if isinstance(result, dict) else None
            if source is not None and source not in call_ids:
                problems.append(f"{where}.observation.results[{n}]: no call {source!r} in its step")
    return problems


def _fields(value: Any, table: dict[str, tuple[Any, bool]], where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: not an object"]
    problems = [f"{where}.{name}: not in the specification" for name in value if name not in table]
    for name, (kind, required) in table.items():
        if name not in value:
            if required:
                problems.append(f"{where}.{name}: missing")
        elif (
            value[name] is None
            or not isinstance(value[name], kind)
            or (kind is int and isinstance(value[name], bool))
        ):
            problems.append(f"{where}.{name}: {type(value[name]).__name__}, not {kind}")
    return problems
