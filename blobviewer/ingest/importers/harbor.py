"""A Harbor trial folder: one recording per trial (docs/evaluations.md).

Harbor (the Terminal-Bench framework) writes a job as `jobs/<job>/<trial>/`, each trial
with `config.json` (what ran), `result.json` once it ended (`task_name`, `agent_info`,
`verifier_result.rewards`, `exception_info`), `verifier/reward.txt` or `reward.json`,
and the agent's logs in `agent/`: `trajectory.json` (ATIF) and, for agents that keep one,
their own log under `agent/sessions/` (Claude Code's `projects/<slug>/<id>.jsonl`, Codex's
`<yyyy>/<mm>/<dd>/rollout-….jsonl`). The native log is richer than its ATIF conversion
and is read instead when there is one; the trial's facts go on the session either way:
its job, task, agent, model, reward and outcome.

Plain Python, no Django; reads only small files here (the logs are read by their importers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blobviewer.ingest.importers.recording import (
    Recording,
    dict_field,
    finite_number,
    str_or_empty,
)

# Files a trial folder holds besides its agent's logs; one of them says it is a trial.
_TRIAL_FILES = ("result.json", "config.json")
# Files a job folder holds beside its trials.
_JOB_FILES = ("result.json", "config.json", "job.log")
# Small files only: a result or config bigger than this is not read.
_MAX_FACTS = 8 << 20


def is_trial(path: Path) -> bool:
    """Whether *path* is a Harbor trial folder: `agent/` with a trajectory or native logs,
    beside `result.json` or `config.json`. Never raises."""
    try:
        agent = path / "agent"
        return (
            agent.is_dir()
            and any((path / name).is_file() for name in _TRIAL_FILES)
            and ((agent / "trajectory.json").is_file() or (agent / "sessions").is_dir())
        )
    except OSError:
        return False


def native_logs(path: Path) -> list[Path]:
    """The agent's own main logs in the trial folder *path*, largest first: Claude Code
    sessions (not its sub-agents' logs) and Codex rollouts."""
    sessions = path / "agent" / "sessions"
    found = [
        *sessions.glob("projects/*/*.jsonl"),
        *sessions.glob("[0-9][0-9][0-9][0-9]/*/*/rollout-*.jsonl"),
    ]
    sized = []
    for log in found:
        try:
            if log.is_file():
                sized.append((log.stat().st_size, log))
        except OSError:
            continue
    return [log for _, log in sorted(sized, key=lambda pair: (-pair[0], str(pair[1])))]


def trajectory_path(path: Path) -> Path:
    return path / "agent" / "trajectory.json"


def trial_facts(path: Path) -> dict[str, Any]:
    """What the trial folder *path* says of its run, as header fields: `job`, `task`,
    `reward`, `outcome`, `trial_id` and the `meta` to add (trial, agent, model, rewards,
    the exception that ended it)."""
    result = _json_file(path / "result.json")
    config = _json_file(path / "config.json")
    agent_info = dict_field(result, "agent_info")
    agent_config = dict_field(config, "agent")
    model_info = dict_field(agent_info, "model_info")
    rewards = _rewards(path, result)
    reward = _main_reward(rewards)
    exception = dict_field(result, "exception_info")
    meta: dict[str, Any] = {
        "harbor_trial": str_or_empty(result.get("trial_name"))
        or str_or_empty(config.get("trial_name"))
        or path.name,
        "agent": str_or_empty(agent_info.get("name")) or str_or_empty(agent_config.get("name")),
        "agent_version": str_or_empty(agent_info.get("version")),
    }
    model = str_or_empty(model_info.get("name")) or str_or_empty(agent_config.get("model_name"))
    if model:
        meta["harbor_model"] = model
    if rewards:
        meta["rewards"] = rewards
    if exception:
        meta["exception"] = {
            "type": str_or_empty(exception.get("exception_type")),
            "message": str_or_empty(exception.get("exception_message"))[:2000],
        }
    return {
        "job": _job_name(path, config),
        "task": _task_name(result, config),
        "reward": reward,
        "outcome": _outcome(reward, rewards, bool(exception)),
        "trial_id": str_or_empty(result.get("id")),
        "meta": {key: value for key, value in meta.items() if value},
    }


def with_trial_facts(recording: Recording, facts: dict[str, Any]) -> Recording:
    """*recording* (the trial's main session) with the trial's facts on its header."""
    session = recording.header
    for key in ("job", "task", "reward", "outcome"):
        if facts[key] not in ("", None):
            session[key] = facts[key]
    session["meta"] = {**session.get("meta", {}), **facts["meta"]}
    # The trial's name (Harbor's: the task and a suffix of its own) tells a job's trials
    # of one task apart; the task is the session's too.
    session["title"] = facts["meta"]["harbor_trial"]
    return recording


def _json_file(path: Path) -> dict[str, Any]:
    try:
        if path.stat().st_size > _MAX_FACTS:
            return {}
        value = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _rewards(path: Path, result: dict[str, Any]) -> dict[str, float]:
    """The verifier's rewards by name: result.json's (written last), else
    `verifier/reward.json`, else `verifier/reward.txt` (one number, named `reward`)."""
    found = dict_field(dict_field(result, "verifier_result"), "rewards")
    if not found:
        found = _json_file(path / "verifier" / "reward.json")
    if not found:
        try:
            with (path / "verifier" / "reward.txt").open("rb") as file:
                text = file.read(1000).decode(errors="replace").strip()
            found = {"reward": float(text[:100])} if text else {}
        except (OSError, ValueError):
            found = {}
    numbers = {str(name)[:100]: finite_number(value) for name, value in list(found.items())[:50]}
    return {name: number for name, number in numbers.items() if number is not None}


def _main_reward(rewards: dict[str, float]) -> float | None:
    if "reward" in rewards:
        return rewards["reward"]
    return next(iter(rewards.values())) if len(rewards) == 1 else None


def _outcome(reward: float | None, rewards: dict[str, float], failed: bool) -> str:
    """`pass` for a reward of 1 or more, `fail` for 0 or less, `partial` between; `error`
    for a trial that ended in an exception with no reward; else ""."""
    if reward is None:
        return "error" if failed and not rewards else ""
    if reward >= 1:
        return "pass"
    return "fail" if reward <= 0 else "partial"


def _job_name(path: Path, config: dict[str, Any]) -> str:
    """The job folder's name (`jobs/<job>/<trial>`), else the folder the config says the
    job kept its trials in (a trial pushed alone, or copied out of its job), else the
    job's id."""
    job = path.parent
    if any((job / name).is_file() for name in _JOB_FILES):
        return job.name
    trials_dir = Path(str_or_empty(config.get("trials_dir"))).name
    if trials_dir and trials_dir != "trials":  # Harbor's default for a trial run alone
        return trials_dir
    return str_or_empty(config.get("job_id"))


def _task_name(result: dict[str, Any], config: dict[str, Any]) -> str:
    name = str_or_empty(result.get("task_name"))
    if name:
        return name
    task = dict_field(config, "task")
    return str_or_empty(task.get("name")) or Path(str_or_empty(task.get("path"))).name
