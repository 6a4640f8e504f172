"""The documentation: README.md is a short front door whose links all work, the pages of
docs/ exist and link to each other's real headings, and nothing in the repository points at
a specification or an issue that lives outside it.

Plain file reads: no Django, no network.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"

# The pages the code's comments cite by name (see README.md, "Documentation").
PAGES = [
    "promotion.md",
    "store.md",
    "selectors.md",
    "agents.md",
    "session-log.md",
    "recording.md",
    "evaluations.md",
    "pages.md",
    "http-api.md",
    "team.md",
    "mcp.md",
    "object-storage.md",
    "benchmarks.md",
    "export.md",
    "cost.md",
]
README_MAX_LINES = 250

# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
# What no file may say: the contract lives in docs/, and the fixtures in tests/fixtures.
STALE = re.compile(r"SPEC [0-9]|[Ii]ssue [0-9]|shared[/]fixtures|BLOBVIEWER_FIXTURE[S]")
SKIPPED_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"}


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def without_code(text: str) -> str:
    """*text* less its fenced blocks and inline code, where brackets are not links."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lowercase, punctuation other
    than `-` and `_` removed, each space a `-`."""
    text = re.sub(r"[`*]", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link keeps its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of *path*; a repeated heading gets `-1`, `-2`, … as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = anchor(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def relative_links(path: Path) -> list[str]:
    targets = LINK.findall(without_code(path.read_text(encoding="utf-8")))
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # http:, mailto:


def test_the_readme_is_at_most_250_lines():
    lines = README.read_text(encoding="utf-8").splitlines()

    assert len(lines) <= README_MAX_LINES


def test_the_readme_starts_with_the_two_commands():
    first_block = FENCE.search(README.read_text(encoding="utf-8"))

    assert first_block is not None
    assert "make run" in first_block.group()
    assert "make test" in first_block.group()


@pytest.mark.parametrize("page", PAGES)
def test_every_documentation_page_exists(page):
    assert (DOCS / page).is_file()


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_points_at_a_file_and_a_heading_in_it(path):
    broken = []
    for target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")

    assert broken == []


def test_the_anchor_rule_is_githubs():
    assert anchor("Run it for a team") == "run-it-for-a-team"
    assert anchor("The 8,000-byte cap") == "the-8000-byte-cap"
    assert anchor("GET /api/inspect") == "get-apiinspect"
    assert anchor("The `inspect` result_kind") == "the-inspect-result_kind"


def files_to_search() -> list[Path]:
    found = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if SKIPPED_DIRS & set(parts) or parts[:2] == ("tests", "fixtures"):
            continue
        if path.suffix in (".py", ".md") and path.is_file():
            found.append(path)
    return found


def test_nothing_cites_a_spec_or_issue_outside_the_repository():
    stale = []
    for path in files_to_search():
        if path == Path(__file__).resolve():
            continue  # this file names what it looks for
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if STALE.search(line):
                stale.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")

    assert stale == []
