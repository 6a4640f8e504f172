"""The folders where the agents blobviewer reads keep their recordings on this machine.

`manage.py ingest --agents` looks for each under the user's home directory
(`Path.home()`, so HOME decides: tests point it at a fake home). Where each agent keeps its
files, and what that rests on:

- Claude Code: `~/.claude/projects/<project>/<session id>.jsonl` (sub-agents' logs in
  `<session id>/subagents/`), as Claude Code writes them.
- Codex CLI: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` (Codex's default CODEX_HOME).
- Gemini CLI: `~/.gemini/tmp/<project hash>/chats/session-*.json` or `.jsonl`; the rest of
  `~/.gemini/tmp/<project hash>/` (`logs.json`, checkpoints, shell history) is Gemini's
  own state, not a recording, so only `chats/` folders count.
- OpenHands: the CLI and the V1 SDK keep conversations in `~/.openhands/conversations/<id>/`
  (OpenHands' documentation: "OpenHands CLI automatically saves your conversation history
  in ~/.openhands/conversations"; OH_PERSISTENCE_DIR "defaults to ~/.openhands"); the V0
  app's local file store puts a conversation in `sessions/<id>/events/<n>.json` under its
  `file_store_path`, or in `users/<user id>/conversations/<id>/` when it runs with user
  ids (openhands/storage/locations.py); `~/.openhands` is that file store for a local
  install. Only conversation folders (see blobviewer.ingest.importers.folder_layout) count in
  these three: the rest is OpenHands' settings and state.

Which files inside these folders are recordings is still decided by their content at
ingest; `holds` only keeps other files of the agent's own (its logs, settings, caches) from
being offered as recordings at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from blobviewer.ingest.importers import folder_layout


def _any_recording(recording: Path) -> bool:
    return True


def _gemini_chat(recording: Path) -> bool:
    # <project hash>/chats/session-*.json(l): a session, not Gemini's logs.json
    return recording.parent.name == "chats"


def _conversation_folder(recording: Path) -> bool:
    return recording.is_dir() and folder_layout(recording) is not None


@dataclass(frozen=True)
class AgentFolder:
    """One folder where *agent* keeps recordings, looked up under the home directory."""

    agent: str
    relative: str  # to the home directory, e.g. ".codex/sessions"
    accepts: Callable[[Path], bool] = _any_recording

    def path(self, home: Path) -> Path:
        return home / self.relative

    def display(self) -> str:
        return f"~/{self.relative}"

    def holds(self, recording: Path) -> bool:
        """Whether *recording* (a file or conversation folder found in this folder) is
        one of the agent's recordings rather than other state the agent keeps there."""
        return self.accepts(recording)


KNOWN_FOLDERS: tuple[AgentFolder, ...] = (
    AgentFolder("Claude Code", ".claude/projects"),
    AgentFolder("Codex CLI", ".codex/sessions"),
    AgentFolder("Gemini CLI", ".gemini/tmp", _gemini_chat),
    AgentFolder("OpenHands", ".openhands/conversations", _conversation_folder),
    AgentFolder("OpenHands", ".openhands/sessions", _conversation_folder),
    AgentFolder("OpenHands", ".openhands/users", _conversation_folder),
)


@dataclass(frozen=True)
class FoundFolder:
    folder: AgentFolder
    path: Path
    exists: bool


def find_agent_folders(home: Path | None = None) -> list[FoundFolder]:
    """Every known folder, in KNOWN_FOLDERS order, with whether it is on this machine
    (a directory under *home*, default `Path.home()`)."""
    home = Path.home() if home is None else home
    return [
        FoundFolder(folder, folder.path(home), folder.path(home).is_dir())
        for folder in KNOWN_FOLDERS
    ]


def describe_search(found: Iterable[FoundFolder]) -> list[str]:
    """One line per agent: the folders found, or where none was: `found Codex CLI
    recordings in /home/me/.codex/sessions`, `no Gemini CLI folder (~/.gemini/tmp)`."""
    lines: list[str] = []
    by_agent: dict[str, list[FoundFolder]] = {}
    for entry in found:
        by_agent.setdefault(entry.folder.agent, []).append(entry)
    for agent, entries in by_agent.items():
        present = [entry for entry in entries if entry.exists]
        if present:
            paths = ", ".join(str(entry.path) for entry in present)
            lines.append(f"found {agent} recordings in {paths}")
        else:
            looked = ", ".join(entry.folder.display() for entry in entries)
            lines.append(f"no {agent} folder ({looked})")
    return lines


class RecordingFilter:
    """Whether a path under one of the found agents' folders is one of its recordings (see
    AgentFolder.holds); a path under none of them (a PATH given besides --agents) is not
    judged here: it passes."""

    def __init__(self, found: Iterable[FoundFolder]) -> None:
        self._folders = [entry for entry in found if entry.exists]

    def __call__(self, recording: Path) -> bool:
        for entry in self._folders:
            if recording == entry.path or entry.path in recording.parents:
                return entry.folder.holds(recording)
        return True
