"""The demo tools: confined to their root, and honest about what they cannot read."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from core.agent.tools import ToolError
from core.demo_tools import (
    demo_tools,
    grep,
    installed_packages,
    list_dir,
    package_metadata,
    read_file,
    resolve_inside,
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project root with a few files, beside a secret that must stay out of reach."""
    (tmp_path / "secret.txt").write_text("password=hunter2\n")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text(
        "def main():\n    return 1\n\ndef helper():\n    pass\n"
    )
    (project / "README.md").write_text("# Demo\nmain entry point\n")
    (project / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("def not_code(): pass\n")
    (project / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (project / "outside").symlink_to(tmp_path)
    (project / "inside.txt").symlink_to(project / "README.md")
    return project.resolve()


# -- confinement ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["../secret.txt", "src/../../secret.txt", "/etc/passwd", "escape.txt", "outside/secret.txt"],
)
def test_paths_outside_the_root_are_refused(root: Path, path: str) -> None:
    with pytest.raises(ToolError, match="is outside the directory these tools may read"):
        read_file(root, path)


def test_the_message_does_not_reveal_where_the_root_is(root: Path) -> None:
    with pytest.raises(ToolError) as caught:
        read_file(root, "../secret.txt")
    assert str(root) not in str(caught.value)


def test_an_absolute_path_inside_the_root_is_allowed(root: Path) -> None:
    assert read_file(root, str(root / "README.md")).startswith("# Demo")


def test_a_symlink_that_stays_inside_the_root_is_followed(root: Path) -> None:
    assert read_file(root, "inside.txt") == "# Demo\nmain entry point\n"


def test_dot_dot_that_stays_inside_is_fine(root: Path) -> None:
    assert resolve_inside(root, "src/../README.md") == root / "README.md"


def test_list_dir_and_grep_are_confined_too(root: Path) -> None:
    with pytest.raises(ToolError, match="outside"):
        list_dir(root, "..")
    with pytest.raises(ToolError, match="outside"):
        grep(root, "password", path="outside")


def test_grep_does_not_follow_a_symlink_out_of_the_root(root: Path) -> None:
    assert "hunter2" not in grep(root, "password")


def test_a_nul_character_is_not_a_path(root: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        read_file(root, "README.md\x00.txt")


# -- read_file, list_dir, grep --------------------------------------------------------------------


def test_read_file_returns_the_whole_text(root: Path) -> None:
    assert read_file(root, "src/app.py").startswith("def main():\n")


def test_read_file_says_what_is_wrong_with_what_it_cannot_read(root: Path) -> None:
    with pytest.raises(ToolError, match="'src' is a directory; use list_dir"):
        read_file(root, "src")
    with pytest.raises(ToolError, match="no file 'nope.txt'"):
        read_file(root, "nope.txt")
    with pytest.raises(ToolError, match=r"'logo.png' is not UTF-8 text \(byte 0\); is it binary\?"):
        read_file(root, "logo.png")


def test_list_dir_shows_directories_files_with_sizes_and_symlinks(root: Path) -> None:
    assert list_dir(root, ".").splitlines() == [
        ".git/",
        "README.md  24 bytes",
        "escape.txt@",
        "inside.txt@",
        "logo.png  11 bytes",
        "outside@",
        "src/",
    ]


def test_list_dir_of_a_file_is_an_error(root: Path) -> None:
    with pytest.raises(ToolError, match="is not a directory"):
        list_dir(root, "README.md")


def test_grep_prints_file_line_and_text_and_skips_hidden_and_binary_files(root: Path) -> None:
    assert grep(root, r"^def ").splitlines() == [
        "src/app.py:1: def main():",
        "src/app.py:4: def helper():",
    ]


def test_grep_in_one_file(root: Path) -> None:
    assert grep(root, "entry", path="README.md") == "README.md:2: main entry point"


def test_grep_says_when_nothing_matches(root: Path) -> None:
    assert grep(root, "zebra", path="src") == "no line matches 'zebra' in src"


def test_grep_refuses_a_bad_regex(root: Path) -> None:
    with pytest.raises(ToolError, match=r"bad regex '\(': missing \)"):
        grep(root, "(")


def test_grep_cuts_very_long_lines(root: Path) -> None:
    (root / "min.js").write_text("var x=1;" * 1000 + "\n")
    (line,) = grep(root, "var", path="min.js").splitlines()
    assert line.endswith("…")
    assert len(line) < 400


# -- packages -------------------------------------------------------------------------------------


def test_installed_packages_are_objects_with_name_version_and_summary() -> None:
    packages = installed_packages()
    assert all(set(p) == {"name", "version", "summary"} for p in packages)
    django = next(p for p in packages if p["name"] == "Django")
    assert django["version"].startswith("5.2")
    names = [p["name"].lower() for p in packages]
    assert names == sorted(names)
    assert len(set(names)) == len(names)


def test_package_metadata_is_an_object_with_the_core_fields() -> None:
    metadata = package_metadata("django")
    assert metadata["name"] == "Django"
    assert isinstance(metadata["requires_dist"], list)
    assert isinstance(metadata["file_count"], int) and metadata["file_count"] > 0
    assert isinstance(metadata["entry_points"], list)
    json.dumps(metadata)  # a JSON value through and through


def test_an_unknown_package_points_to_installed_packages() -> None:
    with pytest.raises(ToolError, match="no installed package named 'no-such-pkg-x'; installed_pa"):
        package_metadata("no-such-pkg-x")


# -- as tools -------------------------------------------------------------------------------------


def test_demo_tools_are_described_tools_over_their_root(root: Path) -> None:
    tools = {t.name: t for t in demo_tools(root)}
    assert list(tools) == [
        "read_file",
        "list_dir",
        "grep",
        "installed_packages",
        "package_metadata",
    ]
    assert tools["grep"].parameters["required"] == ["pattern"]
    assert (
        asyncio.run(tools["read_file"].execute({"path": "README.md"}))
        == "# Demo\nmain entry point\n"
    )
    packages = json.loads(asyncio.run(tools["installed_packages"].execute({})))
    assert isinstance(packages, list) and isinstance(packages[0], dict)
    with pytest.raises(ToolError, match="outside"):
        asyncio.run(tools["read_file"].execute({"path": "../secret.txt"}))


def test_demo_tools_need_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be a directory"):
        demo_tools(tmp_path / "missing")


def test_the_root_may_itself_be_reached_through_a_symlink(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-project"
    os.symlink(root, link)
    (tool,) = (t for t in demo_tools(link) if t.name == "read_file")
    assert asyncio.run(tool.execute({"path": "README.md"})).startswith("# Demo")
