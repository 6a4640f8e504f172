"""Two runs of one task made from the real Claude Code recording: A is the recording as
it is; B is the same run with its first step left out and one big output (a 358-line
file it read) changed on every other line, so their steps part ways at the start, agree
after, and differ in one output whose diff takes two pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from importers.recordings import CLAUDE_CODE

B_SESSION = "0196a1b2-0000-7000-8000-0000000000b0"
# The Read whose output B changes, and the step B leaves out (the run's first call).
CHANGED_CALL = "toolu_01PcDePdi3c1paSyqc8MgtcM"


def write_pair(folder: Path) -> tuple[Path, Path]:
    """A and B (see the module's docstring) in *folder*."""
    lines = [json.loads(line) for line in CLAUDE_CODE.read_text().splitlines() if line.strip()]
    a = folder / CLAUDE_CODE.name
    a.write_text(CLAUDE_CODE.read_text())
    dropped = _first_call(lines)
    b_lines = []
    for line in lines:
        line = {**line, "sessionId": B_SESSION}
        message = line.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            blocks = [_changed(block) for block in message["content"] if not _is(block, dropped)]
            if not blocks:
                continue
            line["message"] = {**message, "content": blocks}
        b_lines.append(line)
    b = folder / f"{B_SESSION}.jsonl"
    b.write_text("".join(json.dumps(line) + "\n" for line in b_lines))
    return a, b


def changed_text(text: str) -> str:
    """*text* with every other line changed (B's copy of the changed output)."""
    return "\n".join(
        line.upper() + "  # changed" if number % 2 else line
        for number, line in enumerate(text.split("\n"))
    )


def _first_call(lines: list[dict[str, Any]]) -> str:
    for line in lines:
        message = line.get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    return str(block["id"])
    raise AssertionError("the recording has no tool call")


def _is(block: Any, call_id: str) -> bool:
    return isinstance(block, dict) and call_id in (block.get("id"), block.get("tool_use_id"))


def _changed(block: Any) -> Any:
    if not (isinstance(block, dict) and block.get("tool_use_id") == CHANGED_CALL):
        return block
    return {**block, "content": changed_text(block["content"])}
