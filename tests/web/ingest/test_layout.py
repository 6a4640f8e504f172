"""Ingest reads in small pieces: no module of blobviewer/ingest (importers included) or
the ingest command over 600 lines, no function or method in them over 80."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MODULES = sorted(
    [
        *(ROOT / "blobviewer" / "ingest").rglob("*.py"),
        ROOT / "blobviewer" / "management" / "commands" / "ingest.py",
    ]
)
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def named(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_it_finds_the_ingest_modules() -> None:
    names = {named(path) for path in MODULES}
    assert {"blobviewer/ingest/sessions.py", "blobviewer/ingest/importers/detect.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=named)
def test_no_module_is_over_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{named(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=named)
def test_no_function_is_over_80_lines(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [
        f"{node.name} (line {node.lineno}): {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{named(path)}: {', '.join(long)}"
