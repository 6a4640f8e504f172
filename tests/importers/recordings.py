"""The real recordings in tests/fixtures/real (sources and licences in its README), and
writers for hand-made samples."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"
CLAUDE_CODE = FIXTURES / "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"
MINI_SWE_AGENT = FIXTURES / "django__django-12708.traj.json"
SWE_AGENT_CLASSIC = FIXTURES / "pydicom__pydicom-1458.traj"


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, entries: list[object]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    return path


CLAUDE_SESSION = "a7da6a22-facc-4fcd-8bab-f83c87862004"


def claude_line(kind: str, content: object, **extra: object) -> dict:
    """One line of a Claude Code session, as its JSONL holds it."""
    return {
        "type": kind,
        "sessionId": CLAUDE_SESSION,
        "timestamp": "2025-11-29T15:16:58.435Z",
        "message": {"role": kind, "content": content},
        **extra,
    }
