"""The code's layout, as a newcomer relies on it: rooms with a docstring each, a small top
level, modules of one idea (none over 600 lines), and one name for one thing."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("catalog", "compare", "ingest", "otlp", "push", "reader", "search", "team", "timeline")
# Django's names for its own hooks, and the importer interface every importer module
# implements (blobviewer/ingest/importers/: `looks_like` and `load`).
SHARED_BY_DESIGN = {"Meta", "Migration", "Command", "load", "looks_like"}
MAX_MODULE_LINES = 600
MAX_TOP_LEVEL_MODULES = 15


def _modules() -> list[Path]:
    return sorted(
        path
        for top in ("core", "blobviewer")
        for path in (REPO / top).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_each_room_is_a_package_that_says_what_it_does_in_one_line() -> None:
    for room in ROOMS:
        init = REPO / "blobviewer" / room / "__init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert docstring and "\n" not in docstring.strip(), f"{init}: a one-line docstring"


def test_the_site_keeps_few_modules_at_its_top_level() -> None:
    modules = sorted(path.name for path in (REPO / "blobviewer").glob("*.py"))
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_no_module_is_over_600_lines() -> None:
    long = {
        str(path.relative_to(REPO)): lines
        for path in _modules()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_two_top_level_classes_or_functions_share_a_public_name() -> None:
    places: dict[str, set[str]] = defaultdict(set)
    for path in _modules():
        for node in ast.parse(path.read_text()).body:
            named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            if named and not node.name.startswith("_") and node.name not in SHARED_BY_DESIGN:
                places[node.name].add(str(path.relative_to(REPO)))
    repeated = {name: sorted(where) for name, where in places.items() if len(where) > 1}
    assert repeated == {}
