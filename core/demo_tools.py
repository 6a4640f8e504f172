"""Real tools for demos, confined to one root directory.

read_file, list_dir and grep never read outside the root: every path is resolved (which
collapses `..` and follows symlinks) and refused unless it stays inside. installed_packages
and package_metadata describe the Python environment the agent runs in, as JSON.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.agent.tools import Tool, ToolError, tool

__all__ = [
    "demo_tools",
    "grep",
    "installed_packages",
    "list_dir",
    "package_metadata",
    "read_file",
    "resolve_inside",
]

MAX_FILE_BYTES = 20 * 1024 * 1024  # read_file refuses bigger files
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024  # grep skips bigger files
GREP_MAX_MATCHES = 2000
GREP_LINE_CHARS = 300  # a matching line is shown up to this many characters
# Directories grep does not walk into: version control, caches, virtual environments.
GREP_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


def resolve_inside(root: Path, path: str) -> Path:
    """*path* (relative to *root*, or absolute) resolved; ToolError when it leaves *root*."""
    if "\x00" in path:
        raise ToolError(f"{path!r} is not a path: it contains a NUL character")
    try:
        resolved = (root / path).resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop
        raise ToolError(f"cannot resolve {path!r}: {error}") from None
    if not resolved.is_relative_to(root):
        raise ToolError(
            f"{path!r} is outside the directory these tools may read; "
            "give a path relative to it, e.g. '.'"
        )
    return resolved


def _shown(root: Path, path: Path) -> str:
    relative = path.relative_to(root).as_posix()
    return relative if relative != "." else "."


def read_file(root: Path, path: str) -> str:
    """The whole text of a UTF-8 file under *root*."""
    target = resolve_inside(root, path)
    if target.is_dir():
        raise ToolError(f"{path!r} is a directory; use list_dir to see what is in it")
    if not target.is_file():
        raise ToolError(f"no file {path!r}; use list_dir to see what is there")
    size = target.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ToolError(f"{path!r} is {size} bytes; read_file reads up to {MAX_FILE_BYTES}")
    data = target.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(f"{path!r} is not UTF-8 text (byte {error.start}); is it binary?") from None


def list_dir(root: Path, path: str = ".") -> str:
    """One entry per line, sorted: `name/` for a directory, `name  <size> bytes` for a
    file, `name@` for a symlink."""
    target = resolve_inside(root, path)
    if not target.is_dir():
        raise ToolError(f"{path!r} is not a directory")
    lines = []
    for entry in sorted(os.scandir(target), key=lambda e: e.name):
        if entry.is_symlink():
            lines.append(f"{entry.name}@")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            lines.append(f"{entry.name}  {entry.stat().st_size} bytes")
    return "\n".join(lines) if lines else f"{_shown(root, target)} is empty"


def grep(root: Path, pattern: str, *, path: str = ".") -> str:
    """Lines matching the regex *pattern* in the UTF-8 files under *path*, as
    `file:line: text`; hidden and cache directories are skipped."""
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise ToolError(f"bad regex {pattern!r}: {error}") from None
    target = resolve_inside(root, path)
    if not target.exists():
        raise ToolError(f"no file or directory {path!r}")
    out: list[str] = []
    for file in _text_files(root, target):
        text = _text_of(file)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                if len(out) == GREP_MAX_MATCHES:
                    out.append(f"… stopped after {GREP_MAX_MATCHES} matches; narrow the path")
                    return "\n".join(out)
                shown = line if len(line) <= GREP_LINE_CHARS else line[:GREP_LINE_CHARS] + "…"
                out.append(f"{_shown(root, file)}:{number}: {shown}")
    return "\n".join(out) if out else f"no line matches {pattern!r} in {_shown(root, target)}"


def _text_files(root: Path, target: Path) -> Iterator[Path]:
    if target.is_file():
        yield target
        return
    for directory, subdirectories, files in os.walk(target):  # does not follow symlinks
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not name.startswith(".") and name not in GREP_SKIPPED_DIRS
        )
        for name in sorted(files):
            file = Path(directory, name)
            # A symlinked file may point anywhere: only its target inside the root counts.
            if file.is_symlink() and not file.resolve().is_relative_to(root):
                continue
            yield file


def _text_of(file: Path) -> str | None:
    try:
        if file.stat().st_size > GREP_MAX_FILE_BYTES:
            return None
        data = file.read_bytes()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def installed_packages() -> list[dict[str, str]]:
    """Every distribution installed in this Python environment: name, version, summary."""
    seen: dict[str, dict[str, str]] = {}
    for distribution in importlib.metadata.distributions():
        metadata = distribution.metadata
        name = metadata["Name"] or ""
        key = re.sub(r"[-_.]+", "-", name).lower()
        if name and key not in seen:  # the first one on sys.path is the one imported
            seen[key] = {
                "name": name,
                "version": distribution.version,
                "summary": metadata["Summary"] or "",
            }
    return sorted(seen.values(), key=lambda package: package["name"].lower())


def package_metadata(name: str) -> dict[str, Any]:
    """The core metadata of one installed distribution, as JSON, with its entry points
    and the number of files it installed."""
    try:
        distribution = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise ToolError(
            f"no installed package named {name!r}; installed_packages lists them"
        ) from None
    metadata: dict[str, Any] = dict(distribution.metadata.json)
    metadata["entry_points"] = [
        {"name": point.name, "group": point.group, "value": point.value}
        for point in distribution.entry_points
    ]
    metadata["file_count"] = len(distribution.files or ())
    return metadata


def demo_tools(root: str | os.PathLike[str]) -> tuple[Tool, ...]:
    """read_file, list_dir, grep, installed_packages and package_metadata, over *root*."""
    base = Path(root).resolve()
    if not base.is_dir():
        raise ValueError(f"the tools' root must be a directory: {root}")

    @tool(name="read_file")
    def read_file_tool(path: str) -> str:
        """Read a whole UTF-8 text file.

        Args:
            path: the file, relative to the project root, e.g. core/summary.py
        """
        return read_file(base, path)

    @tool(name="list_dir")
    def list_dir_tool(path: str = ".") -> str:
        """List a directory: `name/` for directories, `name  <size> bytes` for files.

        Args:
            path: the directory, relative to the project root
        """
        return list_dir(base, path)

    @tool(name="grep")
    def grep_tool(pattern: str, path: str = ".") -> str:
        """Search files for a Python regex; prints matching lines as `file:line: text`.

        Args:
            pattern: a Python regular expression, matched against each line
            path: a file or directory, relative to the project root
        """
        return grep(base, pattern, path=path)

    @tool(name="installed_packages")
    def installed_packages_tool() -> list[dict[str, str]]:
        """List the Python packages installed where the agent runs, as a JSON array of
        {name, version, summary}."""
        return installed_packages()

    @tool(name="package_metadata")
    def package_metadata_tool(name: str) -> dict[str, Any]:
        """Show one installed Python package's metadata as a JSON object.

        Args:
            name: the distribution name, e.g. Django
        """
        return package_metadata(name)

    return (
        read_file_tool,
        list_dir_tool,
        grep_tool,
        installed_packages_tool,
        package_metadata_tool,
    )
